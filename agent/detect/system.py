"""The rest of the machine: CPU, RAM, free disk, OS and the sandboxes the agent could use.

CPU counts come from psutil; model and AVX flags from ``/proc/cpuinfo``, with ``lscpu`` filling
what cpuinfo lacks (aarch64 has no model name there). On macOS, ``sysctl`` plays that part, then
``system_profiler SPHardwareDataType``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from agent.detect import cpu as cpu_parsers
from agent.detect import macos
from agent.detect.model import CPU, OSInfo
from agent.detect.tools import Host, ToolFailed

MIB = 1024 * 1024


def detect_cpu(host: Host, notes: list[str]) -> CPU:
    found = CPU(
        arch=host.machine or None,
        physical_cores=psutil.cpu_count(logical=False),
        logical_cores=psutil.cpu_count(logical=True),
    )
    if host.system == "Darwin":
        for describe in (_sysctl_cpu, _system_profiler_cpu):
            if _complete(found):
                break
            found = found.merged_with(describe(host, notes))
        return found
    try:
        found = found.merged_with(cpu_parsers.parse_cpuinfo(host.cpuinfo_path.read_text()))
    except OSError as exc:
        notes.append(f"cpuinfo: {exc.strerror or exc}")
    if not _complete(found):
        found = found.merged_with(_lscpu_cpu(host, notes))
    return found


def _complete(found: CPU) -> bool:
    return None not in (found.model, found.avx, found.avx2, found.avx512)


def _lscpu_cpu(host: Host, notes: list[str]) -> CPU:
    text = _tool_text(host, ["lscpu"], notes)
    return cpu_parsers.parse_lscpu(text) if text else CPU()


def _sysctl_cpu(host: Host, notes: list[str]) -> CPU:
    text = _tool_text(host, ["sysctl", "hw", "machdep"], notes)
    return macos.parse_sysctl(text).cpu if text else CPU()


def _system_profiler_cpu(host: Host, notes: list[str]) -> CPU:
    text = _tool_text(host, ["system_profiler", "SPHardwareDataType", "-json"], notes)
    if not text:
        return CPU()
    try:
        return macos.parse_hardware_json(text).cpu
    except ValueError as exc:
        notes.append(f"system_profiler SPHardwareDataType: unreadable output ({exc})")
        return CPU()


def _tool_text(host: Host, argv: list[str], notes: list[str]) -> str | None:
    exe = host.which(argv[0])
    if exe is None:
        notes.append(f"{argv[0]}: not found on PATH")
        return None
    try:
        output = host.tool([exe, *argv[1:]])
    except ToolFailed as exc:
        notes.append(f"{argv[0]}: {exc}")
        return None
    if not output.ok:
        notes.append(f"{argv[0]}: {output.describe()}")
        return None
    return output.stdout


def detect_ram_mb() -> int:
    return psutil.virtual_memory().total // MIB


def detect_disk_free_mb(work_dir: Path | None) -> int | None:
    """Free space where jobs will write: the work dir, or its nearest existing parent."""
    path = (work_dir or Path.cwd()).resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free // MIB
    except OSError:
        return None


def detect_os(host: Host) -> OSInfo:
    return OSInfo(
        system=host.system or None, release=host.release or None, machine=host.machine or None
    )


def detect_sandboxes(host: Host, notes: list[str]) -> list[str]:
    """Which of "docker", "gvisor" (Docker's ``runsc`` runtime) and "bwrap" answer here."""
    found: list[str] = []
    try:
        docker = host.import_module("docker")
    except ImportError:
        notes.append("docker: the docker SDK is not installed")
    else:
        try:
            client = docker.from_env(timeout=2)
            try:
                client.ping()
                found.append("docker")
                if "runsc" in (client.info().get("Runtimes") or {}):
                    found.append("gvisor")
            finally:
                client.close()
        except Exception as exc:  # DockerException, requests' connection errors, timeouts
            notes.append(f"docker: engine not reachable ({type(exc).__name__})")
    if host.which("bwrap") is not None:
        found.append("bwrap")
    return found
