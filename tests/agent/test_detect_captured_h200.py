"""Every nvidia-smi reader against one real machine, checked against what NVML said there.

The files were captured together on an NVIDIA H200 (driver 580.159.04) by
``scripts/capture_gpu.py`` (SOURCES.md, "captured by this project"): the tool's outputs in every
format the agent reads, and, in the same minute, the agent's own detection through NVML. So each
parser's answer can be held against the driver library's answer for the same GPU, rather than
against figures typed in by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.detect import nvidia_smi, sources
from agent.detect.model import GPU
from agent.detect.tools import ToolFailed
from tests.agent.test_detect_sources import RecordedTools, make_host, ok

FIXTURES = Path(__file__).parent / "fixtures" / "hardware"
SMI = FIXTURES / "nvidia-smi"
DETECTION = json.loads((FIXTURES / "agent" / "h200-driver580-detection.json").read_text())
UNDER_LOAD = json.loads(
    (FIXTURES / "agent" / "h200-driver580-gpu-state-under-load.json").read_text()
)

# What the agent's NVML source answered on the machine (detection.json, "nvml").
(NVML,) = DETECTION["nvml"]["gpus"]
IDENTITY = ("name", "uuid", "vram_total_mb", "driver_version", "compute_capability")


def read(name: str) -> str:
    with (SMI / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


def table_and_list() -> list[GPU]:
    return nvidia_smi.merge_table_and_list(
        nvidia_smi.parse_table(read("table-h200-driver580.txt")),
        nvidia_smi.parse_list(read("list-L-h200-driver580.txt")),
    )


READERS = {
    "csv with units": lambda: nvidia_smi.parse_query_csv(
        read("query-csv-h200-driver580-agent-fields.csv")
    ),
    "csv, nounits (the agent's query)": lambda: nvidia_smi.parse_query_csv(
        read("query-csv-nounits-h200-driver580-agent-fields.csv")
    ),
    "csv, noheader, nounits": lambda: nvidia_smi.parse_query_csv(
        read("query-csv-noheader-nounits-h200-driver580-agent-fields.csv"),
        nvidia_smi.QUERY_FIELDS,
    ),
    "-q -x": lambda: nvidia_smi.parse_query_xml(read("q-x-h200-driver580.xml")),
    "-q": lambda: nvidia_smi.parse_query_text(read("q-h200-driver580.txt")),
    "table and -L": table_and_list,
}

# Fields a format does not carry: the XML and text reports have no compute capability, and the
# table shows memory used, not free (the difference is not the free figure: the driver reserves
# some). Everything else each reader must report, and report as NVML did.
NOT_CARRIED = {
    "-q -x": {"compute_capability"},
    "-q": {"compute_capability"},
    "table and -L": {"compute_capability", "vram_free_mb", "throttled"},
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_names_the_gpu_as_nvml_did(reader: str) -> None:
    (gpu,) = READERS[reader]()
    got = gpu.to_dict()
    missing = NOT_CARRIED.get(reader, set())

    for field in IDENTITY:
        assert got[field] == (None if field in missing else NVML[field]), field
    assert got["vendor"] == "nvidia"
    assert got["source"] == "nvidia-smi"


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_reads_the_idle_gpu_as_nvml_did_that_minute(reader: str) -> None:
    (gpu,) = READERS[reader]()
    missing = NOT_CARRIED.get(reader, set())

    # The captures are seconds apart: the counters move by a MiB or a watt, no more.
    assert gpu.temperature_c == NVML["temperature_c"]
    assert gpu.utilization_pct == NVML["utilization_pct"] == 0
    assert gpu.power_w == pytest.approx(NVML["power_w"], abs=1.0)
    if "vram_free_mb" in missing:
        assert gpu.vram_free_mb is None
    else:
        assert gpu.vram_free_mb == pytest.approx(NVML["vram_free_mb"], abs=2)
    # Idle is a clock-event reason (0x1) but not a slowdown: an idle GPU is not throttled.
    assert gpu.throttled is (None if "throttled" in missing else False)


def test_the_idle_reason_is_set_in_the_mask_and_is_not_a_slowdown() -> None:
    header, row = read("query-csv-nounits-h200-driver580-agent-fields.csv").splitlines()
    # Driver 580 answers the old field name with the new one.
    assert header.endswith(", clocks_event_reasons.active")
    assert row.endswith(", 0x0000000000000001")
    assert nvidia_smi.throttled_from_mask("0x0000000000000001") is False


def test_the_loaded_gpu_reads_as_nvml_sampled_it() -> None:
    """A matrix multiply ran for 20 s; the CSV and the agent's heartbeat sample (NVML) were
    taken within a second of each other, eight seconds in."""
    (gpu,) = nvidia_smi.parse_query_csv(read("query-csv-nounits-h200-driver580-under-load.csv"))
    (state,) = UNDER_LOAD["state"]

    assert gpu.utilization_pct == state["utilization_pct"] == 100
    assert gpu.power_w == pytest.approx(state["power_w"], rel=0.05)
    assert gpu.power_w > 600  # against 81 W idle: the load is real
    assert gpu.temperature_c == state["temperature_c"]
    assert gpu.vram_free_mb == pytest.approx(state["vram_free_mb"], abs=2)
    assert gpu.vram_free_mb < NVML["vram_free_mb"]  # the job's 8192² matrices hold memory
    assert gpu.throttled is state["throttled"] is False
    assert gpu.state_dict().keys() == state.keys()


def replayed(**knocked_out: bool) -> RecordedTools:
    """nvidia-smi answering from the captures, with the named steps failing."""

    def failing(what: str) -> Any:
        return ToolFailed(f"{what}: recorded failure")

    answers: dict[tuple[str, ...], Any] = {
        ("/usr/bin/nvidia-smi",): ok(read("table-h200-driver580.txt")),
        ("/usr/bin/nvidia-smi", "-L"): ok(read("list-L-h200-driver580.txt")),
        ("/usr/bin/nvidia-smi", "-q"): ok(read("q-h200-driver580.txt")),
        ("/usr/bin/nvidia-smi", "-q", "-x"): ok(read("q-x-h200-driver580.xml")),
    }
    query = ("/usr/bin/nvidia-smi", f"--query-gpu={','.join(nvidia_smi.QUERY_FIELDS)}")
    answers[query] = ok(read("query-csv-nounits-h200-driver580-agent-fields.csv"))
    for prefix, step in (
        (query, "csv"),
        (("/usr/bin/nvidia-smi", "-q", "-x"), "xml"),
        (("/usr/bin/nvidia-smi", "-q"), "text"),
    ):
        if knocked_out.get(step):
            answers[prefix] = failing(step)
    return RecordedTools(answers)


@pytest.mark.parametrize(
    ("knocked_out", "asked_last", "missing"),
    [
        ({}, "--format=csv,nounits", set()),
        ({"csv": True}, "-q -x", {"compute_capability"}),
        ({"csv": True, "xml": True}, "-q", {"compute_capability"}),
        ({"csv": True, "xml": True, "text": True}, "-L", {"compute_capability"}),
    ],
)
def test_the_agents_nvidia_smi_source_finds_the_gpu_at_every_fallback(
    knocked_out: dict[str, bool], asked_last: str, missing: set[str]
) -> None:
    tools = replayed(**knocked_out)
    notes: list[str] = []

    gpus = sources.nvidia_smi_gpus(make_host(tools, on_path=["nvidia-smi"]), notes)

    assert gpus is not None
    (gpu,) = gpus
    for field in IDENTITY:
        assert getattr(gpu, field) == (None if field in missing else NVML[field]), field
    assert asked_last in " ".join(tools.calls[-1])
    assert len(notes) == len(knocked_out)  # one note per step that failed, none otherwise
