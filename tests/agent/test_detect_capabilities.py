"""detect_capabilities / detect_gpu_state: the fallback order, the JSON contract, a real run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.detect import Capabilities, detect_capabilities, detect_gpu_state, nvidia_smi
from agent.detect.capabilities import detect_gpus
from agent.detect.model import CPU, GPU, OSInfo
from agent.detect.tools import ToolOutput
from tests.agent.test_detect_sources import (
    QUERY,
    RecordedNVML,
    RecordedTools,
    make_host,
    ok,
    read,
)

FIXTURES = Path(__file__).parent / "fixtures" / "hardware"
ALL_ABSENT_NOTES = [
    "nvml: nvidia-ml-py (pynvml) is not installed",
    "gputil: GPUtil is not installed or cannot be imported",
    "nvidia-smi: not found on PATH",
    "rocm-smi: not found on PATH",
    "system_profiler: not found (not macOS)",
]


@pytest.fixture
def h100() -> GPU:
    (gpu,) = nvidia_smi.parse_query_csv(read("nvidia-smi/query-csv-h100-80gb-hbm3-allfields.csv"))
    return gpu


# --- the fallback order ---------------------------------------------------------------------------


def test_without_nvml_and_gputil_nvidia_smi_is_the_source() -> None:
    tools = RecordedTools({QUERY: ok(read("nvidia-smi/query-csv-l40s-allfields.csv"))})
    host = make_host(tools, on_path=["nvidia-smi", "rocm-smi"])
    notes: list[str] = []

    gpus, source = detect_gpus(host, notes)

    assert source == "nvidia-smi"
    assert [gpu.name for gpu in gpus] == ["NVIDIA L40S"]
    assert notes == ALL_ABSENT_NOTES[:2]
    # Found: rocm-smi is never asked.
    assert [call[0] for call in tools.calls] == ["/usr/bin/nvidia-smi"]


def test_nvml_wins_and_no_tool_is_run(h100: GPU) -> None:
    tools = RecordedTools()
    host = make_host(tools, on_path=["nvidia-smi"], modules={"pynvml": RecordedNVML([h100])})

    gpus, source = detect_gpus(host, [])

    assert source == "nvml"
    assert gpus[0].compute_capability == "9.0"
    assert tools.calls == []


def test_gputil_finding_nothing_moves_on_to_the_next_source() -> None:
    gputil = SimpleNamespace(getGPUs=list)
    tools = RecordedTools({("/usr/bin/rocm-smi",): ok(read("rocm-smi/mi100-x4-rocm602-full.json"))})
    notes: list[str] = []

    gpus, source = detect_gpus(
        make_host(tools, on_path=["rocm-smi"], modules={"GPUtil": gputil}), notes
    )

    assert source == "rocm-smi"
    assert len(gpus) == 4
    assert notes[1] == "gputil: ran, found no GPU"


def test_a_broken_nvidia_driver_falls_through_to_rocm_smi() -> None:
    tools = RecordedTools(
        {
            ("/usr/bin/nvidia-smi",): ToolOutput(9, "NVIDIA-SMI has failed.\n"),
            ("/usr/bin/rocm-smi",): ok(read("rocm-smi/rx6700xt-rocm571-full.json")),
        }
    )

    gpus, source = detect_gpus(make_host(tools, on_path=["nvidia-smi", "rocm-smi"]), [])

    assert source == "rocm-smi"
    assert gpus[0].vendor == "amd"


def test_with_every_tool_absent_the_node_is_cpu_only_and_still_described() -> None:
    caps = detect_capabilities(host=make_host())

    assert caps.gpu_source == "none"
    assert caps.gpus == []
    assert caps.notes[:5] == ALL_ABSENT_NOTES
    # CPU facts come from psutil and this machine's real /proc/cpuinfo.
    assert caps.cpu.logical_cores and caps.cpu.logical_cores > 0
    assert caps.cpu.model
    assert caps.ram_mb and caps.ram_mb > 0
    assert "docker: the docker SDK is not installed" in caps.notes
    assert caps.sandboxes == []


def test_aarch64_takes_its_model_name_from_lscpu() -> None:
    tools = RecordedTools(
        {("/usr/bin/lscpu",): ok(read("lscpu/aarch64-graviton2-neoverse-n1.txt"))}
    )
    host = make_host(
        tools,
        on_path=["lscpu"],
        machine="aarch64",
        cpuinfo_path=FIXTURES / "cpuinfo/aarch64-graviton2-neoverse-n1-2cpu.txt",
    )

    caps = detect_capabilities(host=host)

    assert caps.cpu.model == "Neoverse-N1"
    assert caps.cpu.arch == "aarch64"
    assert (caps.cpu.avx, caps.cpu.avx2, caps.cpu.avx512) == (False, False, False)


def test_a_missing_cpuinfo_and_lscpu_leave_a_note_and_psutil_counts() -> None:
    host = make_host(cpuinfo_path=Path("/nonexistent/cpuinfo"))

    caps = detect_capabilities(host=host)

    assert caps.cpu.model is None
    assert caps.cpu.logical_cores and caps.cpu.logical_cores > 0
    assert "lscpu: not found on PATH" in caps.notes
    assert any(note.startswith("cpuinfo: ") for note in caps.notes)


def test_an_apple_silicon_mac_reports_unified_memory_honestly() -> None:
    def profiler(argv: list[str]) -> ToolOutput:
        if argv[1] == "SPDisplaysDataType":
            return ok(read("system_profiler/m1-displays-reindented.json"))
        return ok(read("system_profiler/m1-macbookair-hardware.json"))

    tools = RecordedTools(
        {
            ("/usr/bin/system_profiler",): profiler,
            ("/usr/bin/sysctl",): ToolOutput(1, "", "sysctl: unknown oid\n"),
        }
    )
    host = make_host(tools, on_path=["system_profiler", "sysctl"], system="Darwin", machine="arm64")

    caps = detect_capabilities(host=host)

    assert caps.gpu_source == "system_profiler"
    assert caps.gpus[0].to_dict()["vram_total_mb"] is None
    assert caps.cpu.model == "Apple M1"
    assert caps.cpu.avx is False
    assert (
        f"Apple M1 uses unified memory: no VRAM of its own (vram_total_mb is null); it shares"
        f" the system's {caps.ram_mb} MB of RAM"
    ) in caps.notes


def test_a_mac_cpu_comes_from_sysctl() -> None:
    tools = RecordedTools({("/usr/bin/sysctl",): ok(read("sysctl/darwin-m3-max-sequoia.txt"))})
    host = make_host(tools, on_path=["sysctl"], system="Darwin", machine="arm64")

    caps = detect_capabilities(host=host)

    assert caps.cpu.model == "Apple M3 Max"
    assert caps.cpu.avx512 is False
    assert tools.calls == [("/usr/bin/sysctl", "hw", "machdep")]


# --- sandboxes ------------------------------------------------------------------------------------


class RecordedDocker:
    """The docker SDK's surface used here, for an engine whose runtimes include gVisor's runsc."""

    def __init__(self, runtimes: dict[str, object], *, reachable: bool = True) -> None:
        self.runtimes = runtimes
        self.reachable = reachable
        self.closed = False
        self.timeout: object = None

    def from_env(self, timeout: int) -> RecordedDocker:
        self.timeout = timeout
        if not self.reachable:
            raise ConnectionError("Error while fetching server API version")
        return self

    def ping(self) -> bool:
        return True

    def info(self) -> dict[str, object]:
        return {"Runtimes": self.runtimes}

    def close(self) -> None:
        self.closed = True


def test_sandboxes_list_docker_gvisor_and_bwrap() -> None:
    docker = RecordedDocker({"runc": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc"}})
    host = make_host(on_path=["bwrap"], modules={"docker": docker})

    caps = detect_capabilities(host=host)

    assert caps.sandboxes == ["docker", "gvisor", "bwrap"]
    assert docker.timeout == 2
    assert docker.closed


def test_an_unreachable_docker_engine_is_left_out_with_a_note() -> None:
    host = make_host(modules={"docker": RecordedDocker({}, reachable=False)})

    caps = detect_capabilities(host=host)

    assert caps.sandboxes == []
    assert "docker: engine not reachable (ConnectionError)" in caps.notes


# --- the JSON contract ----------------------------------------------------------------------------


def test_to_dict_is_exactly_the_capabilities_contract(h100: GPU) -> None:
    caps = Capabilities(
        gpus=[h100],
        cpu=CPU("AMD Ryzen 9 7950X", "x86_64", 16, 32, avx=True, avx2=True, avx512=True),
        ram_mb=64000,
        disk_free_mb=500000,
        os=OSInfo("Linux", "6.1.0", "x86_64"),
        sandboxes=["docker", "bwrap"],
        gpu_source="nvidia-smi",
        notes=["GPUtil not installed"],
        agent_version="0.1.0",
    )

    document = json.loads(json.dumps(caps.to_dict()))

    assert document == {
        "gpus": [
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
                "source": "nvidia-smi",
            }
        ],
        "cpu": {
            "model": "AMD Ryzen 9 7950X",
            "arch": "x86_64",
            "physical_cores": 16,
            "logical_cores": 32,
            "avx": True,
            "avx2": True,
            "avx512": True,
        },
        "ram_mb": 64000,
        "disk_free_mb": 500000,
        "os": {"system": "Linux", "release": "6.1.0", "machine": "x86_64"},
        "sandboxes": ["docker", "bwrap"],
        "detection": {"gpu_source": "nvidia-smi", "notes": ["GPUtil not installed"]},
        "agent_version": "0.1.0",
    }


def test_an_unknown_gpu_source_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown gpu_source"):
        Capabilities([], CPU(), None, None, OSInfo(), [], gpu_source="cuda")


def _gpu_tools_here() -> bool:
    return any(shutil.which(tool) for tool in ("nvidia-smi", "rocm-smi", "system_profiler"))


@pytest.mark.skipif(_gpu_tools_here(), reason="this machine has GPU tools")
def test_it_detects_this_cpu_only_machine_for_real(tmp_path: Path) -> None:
    caps = detect_capabilities(work_dir=tmp_path / "not-created-yet")
    document = caps.to_dict()

    assert document["detection"]["gpu_source"] == "none"
    assert document["gpus"] == []
    assert document["cpu"]["logical_cores"] > 0
    assert document["cpu"]["physical_cores"] > 0
    assert document["cpu"]["arch"]
    assert isinstance(document["cpu"]["avx"], bool)
    assert document["ram_mb"] > 0
    assert document["disk_free_mb"] > 0
    assert document["os"]["system"] == "Linux"
    assert set(document["sandboxes"]) <= {"docker", "gvisor", "bwrap"}
    assert (shutil.which("bwrap") is not None) == ("bwrap" in document["sandboxes"])
    assert document["detection"]["notes"][0].startswith("nvml: ")
    json.dumps(document)


# --- detect_gpu_state -----------------------------------------------------------------------------


def test_gpu_state_samples_nvml_with_throttling(h100: GPU) -> None:
    nvml = RecordedNVML([h100], reasons=0x40)

    (state,) = detect_gpu_state(host=make_host(modules={"pynvml": nvml}))

    assert state == {
        "index": 0,
        "utilization_pct": 0,
        "temperature_c": 41,
        "power_w": 69.85,
        "vram_free_mb": 81081,
        "throttled": True,
    }


def test_gpu_state_falls_back_to_the_nvidia_smi_csv_query() -> None:
    tools = RecordedTools(
        {QUERY: ok(read("nvidia-smi/query-csv-rtx4080super-linux-allfields.csv"))}
    )

    (state,) = detect_gpu_state(host=make_host(tools, on_path=["nvidia-smi"]))

    assert state == {
        "index": 0,
        "utilization_pct": 0,
        "temperature_c": 43,
        "power_w": 26.2,
        "vram_free_mb": 15348,
        "throttled": False,
    }


def test_gpu_state_is_empty_without_nvml_or_nvidia_smi() -> None:
    tools = RecordedTools({("/usr/bin/nvidia-smi",): ToolOutput(9, "NVIDIA-SMI has failed.\n")})

    assert detect_gpu_state(host=make_host()) == []
    assert detect_gpu_state(host=make_host(tools, on_path=["nvidia-smi"])) == []


# --- fixtures -------------------------------------------------------------------------------------


def test_every_recorded_fixture_is_read_by_a_test() -> None:
    tests = "".join(path.read_text() for path in Path(__file__).parent.glob("test_detect_*.py"))
    fixtures = sorted(path for path in FIXTURES.rglob("*") if path.is_file())
    sources = (FIXTURES / "SOURCES.md").read_text()

    unused = [
        path.name for path in fixtures if path.name != "SOURCES.md" and path.name not in tests
    ]
    unlisted = [
        str(path.relative_to(FIXTURES))
        for path in fixtures
        if path.name != "SOURCES.md"
        and not re.search(re.escape(str(path.relative_to(FIXTURES))), sources)
    ]
    assert unused == []
    assert unlisted == []
