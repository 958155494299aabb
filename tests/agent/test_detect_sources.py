"""GPU sources and the tool runner: recorded outputs through an injected Host, and real processes.

There is no GPU, NVIDIA driver, rocm-smi or macOS here: NVML is replaced by a stand-in that
answers with a recorded GPU's figures, and tools answer with recorded output.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace

import GPUtil
import pynvml
import pytest

from agent.detect import nvidia_smi, sources
from agent.detect.model import GPU
from agent.detect.tools import Host, ToolFailed, ToolOutput, run_tool

FIXTURES = Path(__file__).parent / "fixtures" / "hardware"
MIB = 1024 * 1024


def read(name: str) -> str:
    with (FIXTURES / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


Answer = ToolOutput | Exception | Callable[[Sequence[str]], ToolOutput]


class RecordedTools:
    """A process runner that answers argv prefixes with recorded outputs and logs every call."""

    def __init__(self, answers: dict[tuple[str, ...], Answer] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> ToolOutput:
        self.calls.append(tuple(argv))
        for prefix, answer in sorted(self.answers.items(), key=lambda item: -len(item[0])):
            if tuple(argv[: len(prefix)]) == prefix:
                if isinstance(answer, Exception):
                    raise answer
                return answer(argv) if callable(answer) else answer
        raise ToolFailed(f"{argv[0]} not found")


def ok(text: str) -> ToolOutput:
    return ToolOutput(0, text)


def make_host(
    tools: RecordedTools | None = None,
    *,
    on_path: Sequence[str] = (),
    modules: dict[str, object] | None = None,
    **overrides: object,
) -> Host:
    """A Host where only ``on_path`` tools exist and only ``modules`` can be imported."""
    available = modules or {}

    def import_module(name: str) -> ModuleType:
        if name not in available:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return available[name]  # type: ignore[return-value]

    return Host(
        run=tools or RecordedTools(),
        which=lambda name: f"/usr/bin/{name}" if name in on_path else None,
        import_module=import_module,
        **overrides,  # type: ignore[arg-type]
    )


class RecordedNVML:
    """Stands in for pynvml: answers in NVML's units (bytes, milliwatts) for recorded GPUs."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(
        self,
        gpus: list[GPU],
        *,
        reasons: int = 0x1,
        unsupported: tuple[str, ...] = (),
        init: Callable[[], None] | None = None,
    ) -> None:
        self.gpus = gpus
        self.reasons = reasons
        self.unsupported = unsupported
        self.init = init
        self.shutdowns = 0

    def _answer(self, what: str, value: object) -> object:
        if what in self.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlInit(self) -> None:
        if self.init is not None:
            self.init()

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.gpus[0].driver_version or ""

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> GPU:
        return self.gpus[index]

    def nvmlDeviceGetName(self, gpu: GPU) -> bytes:
        # Older bindings hand back bytes.
        return (gpu.name or "").encode()

    def nvmlDeviceGetUUID(self, gpu: GPU) -> str | None:
        return gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: GPU) -> SimpleNamespace:
        total, free = (gpu.vram_total_mb or 0) * MIB, (gpu.vram_free_mb or 0) * MIB
        return SimpleNamespace(total=total, free=free, used=total - free)

    def nvmlDeviceGetCudaComputeCapability(self, gpu: GPU) -> tuple[int, int]:
        major, minor = (gpu.compute_capability or "0.0").split(".")
        return int(major), int(minor)

    def nvmlDeviceGetUtilizationRates(self, gpu: GPU) -> SimpleNamespace:
        return SimpleNamespace(gpu=gpu.utilization_pct, memory=0)

    def nvmlDeviceGetTemperature(self, gpu: GPU, sensor: int) -> int | None:
        return gpu.temperature_c

    def nvmlDeviceGetPowerUsage(self, gpu: GPU) -> object:
        return self._answer("power", round((gpu.power_w or 0) * 1000))

    def nvmlDeviceGetCurrentClocksEventReasons(self, gpu: GPU) -> object:
        return self._answer("reasons", self.reasons)


@pytest.fixture
def h100() -> GPU:
    (gpu,) = nvidia_smi.parse_query_csv(read("nvidia-smi/query-csv-h100-80gb-hbm3-allfields.csv"))
    return gpu


# --- NVML -----------------------------------------------------------------------------------------


def test_the_nvml_stand_in_only_answers_calls_the_real_binding_has() -> None:
    calls = [name for name in vars(RecordedNVML) if name.startswith("nvml")]

    assert len(calls) == 13
    assert [name for name in calls if not hasattr(pynvml, name)] == []


def test_nvml_reports_every_field_in_the_contracts_units(h100: GPU) -> None:
    nvml = RecordedNVML([h100, replace(h100, uuid="GPU-1", temperature_c=44)])
    notes: list[str] = []

    gpus = sources.nvml_gpus(make_host(modules={"pynvml": nvml}), notes)

    assert gpus is not None
    assert [gpu.to_dict() for gpu in gpus] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "vendor": "nvidia",
            "uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "vram_total_mb": 81559,
            "vram_free_mb": 81081,
            "compute_capability": "9.0",
            "driver_version": "590.48.01",
            "utilization_pct": 0,
            "temperature_c": 41,
            "power_w": 69.85,
            "source": "nvml",
        },
        {
            "index": 1,
            "name": "NVIDIA H100 80GB HBM3",
            "vendor": "nvidia",
            "uuid": "GPU-1",
            "vram_total_mb": 81559,
            "vram_free_mb": 81081,
            "compute_capability": "9.0",
            "driver_version": "590.48.01",
            "utilization_pct": 0,
            "temperature_c": 44,
            "power_w": 69.85,
            "source": "nvml",
        },
    ]
    assert [gpu.throttled for gpu in gpus] == [False, False]
    assert nvml.shutdowns == 1
    assert notes == []


def test_nvml_readings_a_gpu_does_not_support_are_unknown(h100: GPU) -> None:
    nvml = RecordedNVML([h100], unsupported=("power", "reasons"))

    (gpu,) = sources.nvml_gpus(make_host(modules={"pynvml": nvml}), []) or []

    assert gpu.power_w is None
    assert gpu.throttled is None
    assert gpu.vram_total_mb == 81559


def test_nvml_reports_a_thermal_slowdown_as_throttled(h100: GPU) -> None:
    nvml = RecordedNVML([h100], reasons=pynvml.nvmlClocksEventReasonHwThermalSlowdown)

    (gpu,) = sources.nvml_gpus(make_host(modules={"pynvml": nvml}), []) or []

    assert gpu.throttled is True


def test_nvml_without_the_package_is_absent_with_a_note() -> None:
    notes: list[str] = []

    assert sources.nvml_gpus(make_host(), notes) is None
    assert notes == ["nvml: nvidia-ml-py (pynvml) is not installed"]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="an NVIDIA driver is here")
def test_nvml_for_real_finds_no_driver_library_here() -> None:
    notes: list[str] = []

    assert sources.nvml_gpus(Host(), notes) is None
    assert len(notes) == 1
    assert notes[0].startswith("nvml: NVMLError")


def test_a_wedged_nvml_is_abandoned_at_the_timeout(h100: GPU) -> None:
    release = threading.Event()
    nvml = RecordedNVML([h100], init=lambda: release.wait(30) and None)
    notes: list[str] = []
    started = time.monotonic()
    try:
        result = sources.nvml_gpus(make_host(modules={"pynvml": nvml}, timeout_s=0.3), notes)
    finally:
        release.set()

    assert result is None
    assert time.monotonic() - started < 5
    assert notes == ["nvml: NVML did not answer within 0.3 s"]


# --- GPUtil ---------------------------------------------------------------------------------------


def recorded_gputil_gpus() -> list[GPUtil.GPU]:
    """GPUtil's own GPU objects holding the two GPUs of the mixed GTX 1080 Ti + 1060 capture."""
    recorded = nvidia_smi.parse_query_csv(
        read("nvidia-smi/query-csv-gtx1080ti-plus-gtx1060-mixed-x2.csv")
    )
    # Where nvidia-smi prints "[Not Supported]" (here: the fields not in the capture), GPUtil
    # keeps that text for text fields and NaN for numbers.
    unknown, nan = "[Not Supported]", math.nan
    return [
        GPUtil.GPU(
            gpu.index, unknown, (gpu.utilization_pct or 0) / 100, float(gpu.vram_total_mb or 0),
            nan, nan, unknown, gpu.name, unknown, unknown, unknown, float(gpu.temperature_c or 0),
        )
        for gpu in recorded
    ]  # fmt: skip


def test_gputil_gpus_map_its_fractions_and_nans() -> None:
    module = SimpleNamespace(getGPUs=recorded_gputil_gpus)

    gpus = sources.gputil_gpus(make_host(modules={"GPUtil": module}), [])

    assert gpus is not None
    first, second = gpus
    assert (first.index, first.name, first.vram_total_mb) == (0, "GeForce GTX 1080 Ti", 11175)
    assert (second.index, second.name, second.vram_total_mb) == (1, "GeForce GTX 1060 6GB", 6078)
    assert (first.utilization_pct, first.temperature_c) == (100, 67)
    assert first.source == "gputil"
    # NaN is unknown, not a number.
    assert (first.uuid, first.vram_free_mb, first.driver_version) == (None, None, None)


def test_gputil_that_cannot_be_imported_is_absent_with_a_note() -> None:
    notes: list[str] = []

    assert sources.gputil_gpus(make_host(), notes) is None
    assert notes == ["gputil: GPUtil is not installed or cannot be imported"]


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A PATH holding only the executables a test writes; processes they log are killed after."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    yield bin_dir
    for pid_file in bin_dir.glob("*.pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def write_tool(bin_dir: Path, name: str, body: str) -> None:
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)


def test_real_gputil_running_a_hung_nvidia_smi_is_abandoned_at_the_timeout(fake_bin: Path) -> None:
    # GPUtil runs nvidia-smi with no timeout of its own.
    write_tool(fake_bin, "nvidia-smi", f"echo $$ > {fake_bin}/nvidia-smi.pid\nexec /bin/sleep 30")
    notes: list[str] = []
    started = time.monotonic()

    result = sources.gputil_gpus(Host(timeout_s=0.5), notes)

    assert result is None
    assert time.monotonic() - started < 5
    assert notes == ["gputil: GPUtil did not answer within 0.5 s"]


# --- nvidia-smi -----------------------------------------------------------------------------------

QUERY = ("/usr/bin/nvidia-smi", f"--query-gpu={','.join(nvidia_smi.QUERY_FIELDS)}")
DRIVER_DOWN = ToolOutput(
    9,
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n",
)


def test_nvidia_smi_answers_from_one_csv_query() -> None:
    tools = RecordedTools(
        {QUERY: ok(read("nvidia-smi/query-csv-rtx4080super-linux-allfields.csv"))}
    )

    gpus = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), [])

    assert [(gpu.name, gpu.compute_capability) for gpu in gpus or []] == [
        ("NVIDIA GeForce RTX 4080 SUPER", "8.9")
    ]
    assert tools.calls == [(*QUERY, "--format=csv,nounits")]


def test_nvidia_smi_drops_or_renames_fields_a_driver_refuses() -> None:
    csv_text = read("nvidia-smi/query-csv-l40s-allfields.csv")

    def driver(argv: Sequence[str]) -> ToolOutput:
        fields = argv[1].removeprefix("--query-gpu=").split(",")
        for refused in ("compute_cap", "clocks_throttle_reasons.active"):
            if refused in fields:
                return ToolOutput(2, f'Field "{refused}" is not a valid field to query.\n')
        return ok(csv_text)

    tools = RecordedTools({("/usr/bin/nvidia-smi",): driver})

    (gpu,) = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), []) or []

    asked = [call[1] for call in tools.calls]
    assert len(asked) == 3
    assert "compute_cap" not in asked[1]
    assert "clocks_throttle_reasons.active" in asked[1]
    assert asked[2].endswith(",clocks_event_reasons.active")
    assert gpu.name == "NVIDIA L40S"


def test_nvidia_smi_falls_back_to_the_xml_report() -> None:
    tools = RecordedTools(
        {
            QUERY: ToolOutput(2, "", "Invalid combination of input arguments.\n"),
            ("/usr/bin/nvidia-smi", "-q", "-x"): ok(
                read("nvidia-smi/q-x-rtx2070-x2-driver590.xml")
            ),
        }
    )
    notes: list[str] = []

    gpus = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes)

    assert [gpu.name for gpu in gpus or []] == ["NVIDIA GeForce RTX 2070"] * 2
    assert notes == [
        "nvidia-smi --query-gpu: exit status 2: Invalid combination of input arguments."
    ]


def test_nvidia_smi_falls_back_to_the_text_report_when_the_xml_is_broken() -> None:
    xml = read("nvidia-smi/q-x-tesla-t4.xml")
    tools = RecordedTools(
        {
            QUERY: ToolOutput(2, "", "Invalid combination of input arguments.\n"),
            ("/usr/bin/nvidia-smi", "-q", "-x"): ok(xml[:1000]),
            ("/usr/bin/nvidia-smi", "-q"): ok(read("nvidia-smi/q-rtx5090-driver570.txt")),
        }
    )
    notes: list[str] = []

    (gpu,) = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes) or []

    assert gpu.name == "NVIDIA GeForce RTX 5090"
    assert notes[1].startswith("nvidia-smi -q -x: unreadable output (ParseError")


def test_nvidia_smi_falls_back_to_the_table_and_says_when_names_are_cut() -> None:
    tools = RecordedTools(
        {
            QUERY: ToolOutput(2, "", "Invalid combination of input arguments.\n"),
            ("/usr/bin/nvidia-smi", "-q"): ToolOutput(2, "", "Invalid combination.\n"),
            ("/usr/bin/nvidia-smi",): ok(
                read("nvidia-smi/table-rtx6000ada-x8-truncated-names.txt")
            ),
        }
    )
    tools.answers[("/usr/bin/nvidia-smi", "-L")] = ok("")
    notes: list[str] = []

    gpus = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes) or []

    assert len(gpus) == 8
    assert {gpu.vram_total_mb for gpu in gpus} == {49140}
    assert notes[-1] == "nvidia-smi: GPU names are cut short in the table and -L gave none"


def test_nvidia_smi_without_a_driver_is_absent_with_notes() -> None:
    tools = RecordedTools({("/usr/bin/nvidia-smi",): DRIVER_DOWN})
    notes: list[str] = []

    assert sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes) is None
    assert "couldn't communicate with the NVIDIA driver" in notes[0]


def test_a_hung_nvidia_smi_is_not_asked_again() -> None:
    tools = RecordedTools(
        {("/usr/bin/nvidia-smi",): ToolFailed("nvidia-smi timed out after 15 s", timed_out=True)}
    )
    notes: list[str] = []

    assert sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes) is None
    assert len(tools.calls) == 1
    assert notes == ["nvidia-smi --query-gpu: nvidia-smi timed out after 15 s"]


def test_nvidia_smi_not_on_path_is_absent() -> None:
    notes: list[str] = []

    assert sources.nvidia_smi_gpus(make_host(), notes) is None
    assert notes == ["nvidia-smi: not found on PATH"]


def test_a_real_nvidia_smi_process_on_path_is_run_and_read(fake_bin: Path) -> None:
    csv_path = FIXTURES / "nvidia-smi/query-csv-h100-80gb-hbm3-allfields.csv"
    write_tool(
        fake_bin,
        "nvidia-smi",
        f'case "$1" in --query-gpu=*) /bin/cat "{csv_path}" ;; *) exit 2 ;; esac',
    )

    (gpu,) = sources.nvidia_smi_gpus(Host(), []) or []

    assert (gpu.name, gpu.vram_total_mb, gpu.compute_capability) == (
        "NVIDIA H100 80GB HBM3",
        81559,
        "9.0",
    )


# --- rocm-smi -------------------------------------------------------------------------------------

ROCM_JSON = ("/usr/bin/rocm-smi", "--showproductname")


def test_rocm_smi_reads_json() -> None:
    tools = RecordedTools({ROCM_JSON: ok(read("rocm-smi/mi100-x4-rocm602-full.json"))})

    gpus = sources.rocm_smi_gpus(make_host(tools, on_path=["rocm-smi"]), []) or []

    assert len(gpus) == 4
    assert tools.calls[0][-1] == "--json"


def test_rocm_smi_output_is_used_despite_a_failing_exit_status() -> None:
    # rocm-smi exits non-zero when one of the readings asked for is unsupported.
    tools = RecordedTools({ROCM_JSON: ToolOutput(2, read("rocm-smi/rx6700xt-rocm612-full.json"))})

    (gpu,) = sources.rocm_smi_gpus(make_host(tools, on_path=["rocm-smi"]), []) or []

    assert gpu.name == "Navi 22 [Radeon RX 6700/6700 XT / 6800M]"


def test_rocm_smi_falls_back_to_csv_then_to_the_product_name_report() -> None:
    def rocm(argv: Sequence[str]) -> ToolOutput:
        if argv[-1] == "--csv":
            return ToolOutput(1, "", "Unrecognized arguments: --csv\n")
        if argv[-1] == "--json":
            return ok("not json")
        return ok(read("rocm-smi/rx7900xtx-showproductname-hex-series.txt"))

    tools = RecordedTools({("/usr/bin/rocm-smi",): rocm})
    notes: list[str] = []

    (gpu,) = sources.rocm_smi_gpus(make_host(tools, on_path=["rocm-smi"]), notes) or []

    assert (gpu.vendor, gpu.name) == ("amd", None)
    assert [call[-1] for call in tools.calls] == ["--json", "--csv", "--showproductname"]
    assert notes[0].startswith("rocm-smi --json: unreadable output")
    assert notes[1] == "rocm-smi: exit status 1: Unrecognized arguments: --csv"


def test_rocm_smi_csv_is_read_when_json_is_not() -> None:
    def rocm(argv: Sequence[str]) -> ToolOutput:
        if argv[-1] == "--json":
            return ToolOutput(1, "", "unrecognized arguments: --json\n")
        return ok(read("rocm-smi/rx7900xt-productname-use-vram.csv"))

    tools = RecordedTools({("/usr/bin/rocm-smi",): rocm})

    (gpu,) = sources.rocm_smi_gpus(make_host(tools, on_path=["rocm-smi"]), []) or []

    assert gpu.name == "Radeon RX 7900 XT"


# --- system_profiler ------------------------------------------------------------------------------


def test_system_profiler_reads_json_then_text() -> None:
    def profiler(argv: Sequence[str]) -> ToolOutput:
        if argv[-1] == "-json":
            return ok("{broken")
        return ok(read("system_profiler/imacpro-radeon-pro-vega64-displays.txt"))

    tools = RecordedTools({("/usr/bin/system_profiler",): profiler})
    notes: list[str] = []

    (gpu,) = (
        sources.system_profiler_gpus(make_host(tools, on_path=["system_profiler"]), notes) or []
    )

    assert (gpu.name, gpu.vram_total_mb) == ("Radeon Pro Vega 64", 16384)
    assert notes[0].startswith("system_profiler SPDisplaysDataType -json: unreadable output")


# --- the process runner ---------------------------------------------------------------------------


def test_run_tool_returns_exit_status_and_both_streams() -> None:
    output = run_tool(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); exit(3)"],
        10,
    )

    assert (output.returncode, output.stdout, output.stderr) == (3, "out\n", "err\n")
    assert output.describe() == "exit status 3: err"


def test_run_tool_says_when_a_tool_is_missing() -> None:
    with pytest.raises(ToolFailed, match="no-such-tool-here not found") as failure:
        run_tool(["no-such-tool-here"], 1)

    assert failure.value.timed_out is False


def test_run_tool_kills_a_hung_tool_and_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"/bin/sleep 60 & echo $! > {pid_file}; wait"
    started = time.monotonic()

    with pytest.raises(ToolFailed, match=r"timed out after 0\.5 s") as failure:
        run_tool(["/bin/sh", "-c", script], 0.5)

    assert failure.value.timed_out is True
    assert time.monotonic() - started < 5
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status
