"""``detect_capabilities``: the full description a node registers with, and
``detect_gpu_state``: the cheap GPU sample each heartbeat carries."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

from agent.detect import sources, system
from agent.detect.model import GPU, Capabilities
from agent.detect.tools import Host, ToolFailed

# A heartbeat must not wait long on a slow tool; a missed sample is simply null.
STATE_TIMEOUT_S = 5.0


def detect_capabilities(*, work_dir: Path | None = None, host: Host | None = None) -> Capabilities:
    host = host or Host()
    notes: list[str] = []
    gpus, gpu_source = detect_gpus(host, notes)
    cpu = system.detect_cpu(host, notes)
    ram_mb = system.detect_ram_mb()
    for gpu in gpus:
        if gpu.unified_memory:
            notes.append(
                f"{gpu.name or 'GPU ' + str(gpu.index)} uses unified memory: no VRAM of its own"
                f" (vram_total_mb is null); it shares the system's {ram_mb} MB of RAM"
            )
    return Capabilities(
        gpus=gpus,
        cpu=cpu,
        ram_mb=ram_mb,
        disk_free_mb=system.detect_disk_free_mb(work_dir),
        os=system.detect_os(host),
        sandboxes=system.detect_sandboxes(host, notes),
        gpu_source=gpu_source,
        notes=notes,
        agent_version=agent_version(),
    )


def detect_gpus(host: Host, notes: list[str]) -> tuple[list[GPU], str]:
    """The first source that finds a GPU wins; an empty answer moves on to the next."""
    for name, source in sources.GPU_SOURCES:
        gpus = source(host, notes)
        if gpus:
            return gpus, name
        if gpus is not None:
            notes.append(f"{name}: ran, found no GPU")
    return [], "none"


def detect_gpu_state(*, host: Host | None = None) -> list[dict[str, Any]]:
    """Per-GPU utilisation, temperature, power, free VRAM and throttling: NVML, else nvidia-smi."""
    host = host or Host(timeout_s=STATE_TIMEOUT_S)
    notes: list[str] = []
    gpus = sources.nvml_gpus(host, notes)
    if gpus is None:
        exe = host.which("nvidia-smi")
        if exe is not None:
            try:
                gpus = sources.query_nvidia_smi(host, exe)
            except (ToolFailed, ValueError):
                gpus = None
    return [gpu.state_dict() for gpu in gpus or []]


def agent_version() -> str | None:
    try:
        return metadata.version("computepool-agent")
    except metadata.PackageNotFoundError:
        import agent

        return getattr(agent, "__version__", None)
