"""GPU sources, in the order detection tries them: NVML → GPUtil → nvidia-smi → rocm-smi →
system_profiler.

Each source takes a ``Host`` and a list of notes and returns ``list[GPU]`` (possibly empty: the
tool ran and found none) or ``None`` (the tool is absent, failed or hung), appending a note that
says why. A timed-out tool is not asked again in the same round.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from functools import partial
from types import ModuleType
from typing import Any

from agent.detect import macos, nvidia_smi, rocm_smi
from agent.detect.model import GPU
from agent.detect.tools import Host, ToolFailed, ToolOutput
from agent.detect.values import clean

MIB = 1024 * 1024

Source = Callable[[Host, list[str]], list[GPU] | None]


class _Unreadable(Exception):
    """The tool answered, but not with anything its parser understands."""


# --- NVML --------------------------------------------------------------------------------------


def nvml_gpus(host: Host, notes: list[str]) -> list[GPU] | None:
    """Every NVIDIA GPU through NVML (``pynvml``, package nvidia-ml-py): the richest source."""
    try:
        pynvml = host.import_module("pynvml")
    except ImportError:
        notes.append("nvml: nvidia-ml-py (pynvml) is not installed")
        return None
    try:
        return host.bounded(lambda: read_nvml(pynvml), "NVML")
    except ToolFailed as exc:
        notes.append(f"nvml: {exc}")
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ctypes errors
        notes.append(f"nvml: {_describe(exc)}")
    return None


def read_nvml(pynvml: ModuleType) -> list[GPU]:
    pynvml.nvmlInit()
    try:
        driver = _nvml(pynvml, pynvml.nvmlSystemGetDriverVersion)
        return [
            _nvml_gpu(pynvml, index, pynvml.nvmlDeviceGetHandleByIndex(index), driver)
            for index in range(pynvml.nvmlDeviceGetCount())
        ]
    finally:
        pynvml.nvmlShutdown()


def _nvml_gpu(pynvml: ModuleType, index: int, handle: object, driver: object) -> GPU:
    memory = _nvml(pynvml, pynvml.nvmlDeviceGetMemoryInfo, handle)
    capability = _nvml(pynvml, pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    utilization = _nvml(pynvml, pynvml.nvmlDeviceGetUtilizationRates, handle)
    power_mw = _nvml(pynvml, pynvml.nvmlDeviceGetPowerUsage, handle)
    # Renamed "clock event reasons" in newer NVML; older bindings only have the throttle name.
    reasons_call = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    reasons = _nvml(pynvml, reasons_call, handle) if reasons_call else None
    return GPU(
        index=index,
        name=_text(_nvml(pynvml, pynvml.nvmlDeviceGetName, handle)),
        vendor="nvidia",
        uuid=_text(_nvml(pynvml, pynvml.nvmlDeviceGetUUID, handle)),
        vram_total_mb=memory.total // MIB if memory is not None else None,
        vram_free_mb=memory.free // MIB if memory is not None else None,
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        driver_version=_text(driver),
        utilization_pct=utilization.gpu if utilization is not None else None,
        temperature_c=_nvml(
            pynvml, pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU
        ),
        power_w=round(power_mw / 1000, 2) if power_mw is not None else None,
        source="nvml",
        throttled=bool(reasons & nvidia_smi.THROTTLE_MASK) if reasons is not None else None,
    )


def _nvml(pynvml: ModuleType, call: Callable[..., Any], *args: object) -> Any:
    """One NVML reading, or None where this GPU or driver does not support it."""
    try:
        return call(*args)
    except pynvml.NVMLError:
        return None


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    # Older NVML bindings return bytes; GPUtil keeps nvidia-smi's "[Not Supported]" as text.
    return clean(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)


# --- GPUtil ------------------------------------------------------------------------------------


def gputil_gpus(host: Host, notes: list[str]) -> list[GPU] | None:
    """NVIDIA GPUs through GPUtil (which runs nvidia-smi itself, without a timeout)."""
    try:
        gputil = host.import_module("GPUtil")
    except ImportError:
        # GPUtil also fails to import on Pythons without distutils.
        notes.append("gputil: GPUtil is not installed or cannot be imported")
        return None
    try:
        found = host.bounded(gputil.getGPUs, "GPUtil")
    except ToolFailed as exc:
        notes.append(f"gputil: {exc}")
        return None
    except Exception as exc:  # GPUtil parses by position and raises on unexpected output
        notes.append(f"gputil: {_describe(exc)}")
        return None
    return [gpu_from_gputil(position, found_gpu) for position, found_gpu in enumerate(found)]


def gpu_from_gputil(position: int, gpu: Any) -> GPU:
    """A GPU from a ``GPUtil.GPU``: sizes in MiB, load as a fraction of 1, NaN for unknowns."""
    load = _number(gpu.load)
    index = _number(gpu.id)
    return GPU(
        index=int(index) if index is not None else position,
        name=_text(gpu.name),
        vendor="nvidia",
        uuid=_text(gpu.uuid),
        vram_total_mb=_whole(gpu.memoryTotal),
        vram_free_mb=_whole(gpu.memoryFree),
        driver_version=_text(gpu.driver),
        utilization_pct=round(load * 100) if load is not None else None,
        temperature_c=_whole(gpu.temperature),
        source="gputil",
    )


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not math.isnan(value):
        return float(value)
    return None


def _whole(value: object) -> int | None:
    number = _number(value)
    return round(number) if number is not None else None


# --- nvidia-smi --------------------------------------------------------------------------------

_THROTTLE_FIELD_RENAMES = {"clocks_throttle_reasons.active": "clocks_event_reasons.active"}


def nvidia_smi_gpus(host: Host, notes: list[str]) -> list[GPU] | None:
    """NVIDIA GPUs from nvidia-smi: the CSV query, then ``-q -x``, ``-q``, then table + ``-L``."""
    exe = host.which("nvidia-smi")
    if exe is None:
        notes.append("nvidia-smi: not found on PATH")
        return None
    return _first_answer(
        (
            ("nvidia-smi --query-gpu", lambda: query_nvidia_smi(host, exe)),
            (
                "nvidia-smi -q -x",
                lambda: _parsed(host, [exe, "-q", "-x"], nvidia_smi.parse_query_xml),
            ),
            ("nvidia-smi -q", lambda: _parsed(host, [exe, "-q"], nvidia_smi.parse_query_text)),
            ("nvidia-smi", lambda: _table_and_list(host, exe, notes)),
        ),
        notes,
    )


def _table_and_list(host: Host, exe: str, notes: list[str]) -> list[GPU]:
    """The plain table, with the full names ``-L`` prints (the table cuts long ones short)."""
    table = _parsed(host, [exe], nvidia_smi.parse_table)
    listed = _parsed(host, [exe, "-L"], nvidia_smi.parse_list)
    if any(gpu.name and gpu.name.endswith("...") for gpu in table) and not listed:
        notes.append("nvidia-smi: GPU names are cut short in the table and -L gave none")
    return nvidia_smi.merge_table_and_list(table, listed)


def query_nvidia_smi(host: Host, exe: str) -> list[GPU]:
    """Run the ``--query-gpu`` CSV query, dropping or renaming fields this driver refuses."""
    fields = list(nvidia_smi.QUERY_FIELDS)
    while True:
        output = host.tool([exe, f"--query-gpu={','.join(fields)}", "--format=csv,nounits"])
        refused = nvidia_smi.invalid_field(output.stdout + output.stderr)
        if refused in fields:
            # Old drivers lack compute_cap; the newest may drop the old throttle name.
            renamed = _THROTTLE_FIELD_RENAMES.get(refused)
            fields = [renamed if f == refused else f for f in fields if f != refused or renamed]
            continue
        if not output.ok:
            raise ToolFailed(output.describe())
        return nvidia_smi.parse_query_csv(output.stdout)


# --- rocm-smi ----------------------------------------------------------------------------------


def rocm_smi_gpus(host: Host, notes: list[str]) -> list[GPU] | None:
    """AMD GPUs from rocm-smi: JSON, then CSV, then the plain product-name report."""
    exe = host.which("rocm-smi")
    if exe is None:
        notes.append("rocm-smi: not found on PATH")
        return None
    # rocm-smi exits non-zero when one of several readings is unsupported, yet prints the rest:
    # what parses is used.
    return _first_answer(
        (
            (
                f"rocm-smi {flag}",
                partial(_parsed, host, [exe, *args, flag], parse, require_success=False),
            )
            for args, flag, parse in (
                (rocm_smi.QUERY_ARGS, "--json", rocm_smi.parse_json),
                (rocm_smi.QUERY_ARGS, "--csv", rocm_smi.parse_csv),
                ((), "--showproductname", rocm_smi.parse_text),
            )
        ),
        notes,
        failed_as="rocm-smi",
    )


# --- system_profiler ---------------------------------------------------------------------------


def system_profiler_gpus(host: Host, notes: list[str]) -> list[GPU] | None:
    """GPUs on macOS from ``system_profiler SPDisplaysDataType`` (JSON, then text)."""
    exe = host.which("system_profiler")
    if exe is None:
        notes.append("system_profiler: not found (not macOS)")
        return None
    return _first_answer(
        (
            (f"system_profiler {' '.join(args)}", partial(_parsed, host, [exe, *args], parse))
            for args, parse in (
                (["SPDisplaysDataType", "-json"], macos.parse_displays_json),
                (["SPDisplaysDataType"], macos.parse_displays_text),
            )
        ),
        notes,
        failed_as="system_profiler",
    )


# --- shared ------------------------------------------------------------------------------------

GPU_SOURCES: tuple[tuple[str, Source], ...] = (
    ("nvml", nvml_gpus),
    ("gputil", gputil_gpus),
    ("nvidia-smi", nvidia_smi_gpus),
    ("rocm-smi", rocm_smi_gpus),
    ("system_profiler", system_profiler_gpus),
)


def _first_answer(
    attempts: Iterable[tuple[str, Callable[[], list[GPU]]]],
    notes: list[str],
    *,
    failed_as: str | None = None,
) -> list[GPU] | None:
    """The first of a tool's ways of asking that answers, each tried in turn.

    Each failure leaves a note under the attempt's label (a failed run under `failed_as` where
    given: the tool's own error line names what it refused). A tool that timed out is not asked
    again. None when no attempt answered.
    """
    for label, attempt in attempts:
        try:
            return attempt()
        except ToolFailed as exc:
            notes.append(f"{failed_as or label}: {exc}")
            if exc.timed_out:
                return None
        except _Unreadable as exc:
            notes.append(f"{label}: {exc}")
    return None


def _parsed(
    host: Host,
    argv: list[str],
    parse: Callable[[str], list[GPU]],
    *,
    require_success: bool = True,
) -> list[GPU]:
    output: ToolOutput = host.tool(argv)
    if require_success and not output.ok:
        raise ToolFailed(output.describe())
    try:
        gpus = parse(output.stdout)
    except (ValueError, ET.ParseError, KeyError, AttributeError) as exc:
        if not output.ok:
            raise ToolFailed(output.describe()) from exc
        raise _Unreadable(f"unreadable output ({_describe(exc)})") from exc
    if not gpus and not output.ok:
        raise ToolFailed(output.describe())
    return gpus


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
