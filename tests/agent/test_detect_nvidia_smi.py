"""nvidia-smi parsers against recorded real outputs (tests/agent/fixtures/hardware/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.detect import nvidia_smi
from agent.detect.model import GPU

FIXTURES = Path(__file__).parent / "fixtures" / "hardware" / "nvidia-smi"


def read(name: str) -> str:
    # newline="" keeps the bytes as recorded (no universal-newline translation).
    with (FIXTURES / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


def crlf(text: str) -> str:
    """The same output as nvidia-smi.exe writes it to a pipe on Windows."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


# --- --query-gpu CSV with a header ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "query-csv-rtx4080super-linux-allfields.csv",
            {
                "name": "NVIDIA GeForce RTX 4080 SUPER",
                "vram_total_mb": 16376,
                "vram_free_mb": 15348,
                "compute_capability": "8.9",
                "driver_version": "595.71.05",
                "utilization_pct": 0,
                "temperature_c": 43,
                "power_w": 26.2,
            },
        ),
        (
            "query-csv-rtx2080super-windows-allfields.csv",
            {
                "name": "NVIDIA GeForce RTX 2080 SUPER",
                "vram_total_mb": 8192,
                "vram_free_mb": 7191,
                "compute_capability": "7.5",
                "driver_version": "610.62",
                "temperature_c": 40,
                "power_w": 39.25,
            },
        ),
        (
            "query-csv-l40s-allfields.csv",
            {
                "name": "NVIDIA L40S",
                "vram_total_mb": 46068,
                "vram_free_mb": 45460,
                "compute_capability": "8.9",
                "driver_version": "595.80",
                "utilization_pct": 100,
                "temperature_c": 63,
                "power_w": 144.97,
            },
        ),
        (
            "query-csv-h100-80gb-hbm3-allfields.csv",
            {
                "name": "NVIDIA H100 80GB HBM3",
                "vram_total_mb": 81559,
                "vram_free_mb": 81081,
                "compute_capability": "9.0",
                "driver_version": "590.48.01",
                "temperature_c": 41,
                "power_w": 69.85,
            },
        ),
    ],
)
def test_it_reads_the_fields_it_needs_out_of_full_csv_captures(name: str, expected: dict) -> None:
    # These captures hold 200+ columns with units, [N/A] and deprecated-field markers.
    (gpu,) = nvidia_smi.parse_query_csv(read(name))

    assert {key: getattr(gpu, key) for key in expected} == expected
    assert gpu.index == 0
    assert gpu.vendor == "nvidia"
    assert gpu.uuid == "GPU-00000000-0000-0000-0000-000000000000"
    assert gpu.source == "nvidia-smi"
    # clocks_event_reasons.active is 0x0 or 0x1 (idle) in all of them: nothing slows them down.
    assert gpu.throttled is False


def test_it_reads_windows_line_endings() -> None:
    (gpu,) = nvidia_smi.parse_query_csv(crlf(read("query-csv-rtx2080super-windows-allfields.csv")))

    assert gpu.name == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpu.vram_total_mb == 8192


def test_it_maps_a_header_by_name_with_aliases_and_two_different_gpus() -> None:
    # Asked as gpu_name/clocks.gr; the header answers name/clocks.current.graphics. No index,
    # no memory.free, and old names without the "NVIDIA " prefix.
    first, second = nvidia_smi.parse_query_csv(
        read("query-csv-gtx1080ti-plus-gtx1060-mixed-x2.csv")
    )

    assert (first.index, first.name, first.vram_total_mb) == (0, "GeForce GTX 1080 Ti", 11175)
    assert (second.index, second.name, second.vram_total_mb) == (1, "GeForce GTX 1060 6GB", 6078)
    assert (first.utilization_pct, first.temperature_c, first.power_w) == (100, 67, 280.72)
    assert (second.temperature_c, second.power_w) == (64, 121.51)
    # Not queried: unknown, not derived from total - used.
    assert first.vram_free_mb is None
    assert first.uuid is None
    assert first.compute_capability is None
    assert first.throttled is None


def test_it_maps_a_noheader_row_by_the_field_list_that_was_asked_for() -> None:
    fields = [
        "gpu_name",
        "utilization.gpu",
        "utilization.memory",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "fan.speed",
        "pstate",
        "clocks.current.graphics",
        "clocks.current.memory",
        "power.max_limit",
        "power.default_limit",
    ]

    (gpu,) = nvidia_smi.parse_query_csv(
        read("query-csv-noheader-gtx770-not-supported-windows.csv"), fields
    )

    assert gpu.name == "GeForce GTX 770"
    assert gpu.temperature_c == 52
    # "[Not Supported]" is unknown, never zero.
    assert gpu.utilization_pct is None
    assert gpu.power_w is None


@pytest.mark.parametrize(
    "name",
    [
        "query-csv-noheader-nounits-not-supported-old-driver.csv",
        "query-csv-noheader-nounits-na-newer-driver.csv",
    ],
)
def test_it_reads_nounits_rows_and_both_spellings_of_not_available(name: str) -> None:
    fields = [
        "memory.total",
        "memory.free",
        "memory.used",
        "temperature.gpu",
        "fan.speed",
        "utilization.gpu",
        "utilization.memory",
    ]

    (gpu,) = nvidia_smi.parse_query_csv(read(name), fields)

    assert (gpu.vram_total_mb, gpu.vram_free_mb) == (2004, 2004)
    assert gpu.temperature_c == 44
    assert gpu.utilization_pct == 0
    assert gpu.name is None


def test_it_skips_rows_of_another_width_such_as_error_lines() -> None:
    text = read("query-csv-gtx1080ti-plus-gtx1060-mixed-x2.csv")
    lines = text.splitlines()
    broken = "\n".join([lines[0], "Unable to determine the device handle for GPU0", lines[2]])

    gpus = nvidia_smi.parse_query_csv(broken)

    assert [gpu.name for gpu in gpus] == ["GeForce GTX 1060 6GB"]


def test_the_query_the_agent_sends_is_mapped_back_to_its_own_fields() -> None:
    # The throttle field is asked for by its old name and answered by the new one.
    keys = [nvidia_smi.canonical_field(field) for field in nvidia_smi.QUERY_FIELDS]

    assert keys[:10] == [
        "index",
        "name",
        "uuid",
        "memory.total",
        "memory.free",
        "compute_cap",
        "driver_version",
        "utilization.gpu",
        "temperature.gpu",
        "power.draw",
    ]
    assert keys[10] == "clocks_event_reasons.active"
    assert nvidia_smi.canonical_field("memory.total [MiB]") == "memory.total"


def test_it_reads_the_refused_field_out_of_the_error_message() -> None:
    message = 'Field "compute_cap" is not a valid field to query.\n'

    assert nvidia_smi.invalid_field(message) == "compute_cap"
    assert nvidia_smi.invalid_field("NVIDIA-SMI has failed") is None


@pytest.mark.parametrize(
    ("mask", "throttled"),
    [
        ("0x0000000000000000", False),
        ("0x0000000000000001", False),  # idle
        ("0x0000000000000004", False),  # SW power cap: a busy GPU at its power limit
        ("0x0000000000000008", True),  # HW slowdown
        ("0x0000000000000020", True),  # SW thermal slowdown
        ("0x0000000000000040", True),  # HW thermal slowdown
        ("0x0000000000000080", True),  # HW power brake
        ("0x0000000000000045", True),
        ("[N/A]", None),
        ("[Not Supported]", None),
    ],
)
def test_it_counts_only_thermal_and_power_brake_reasons_as_throttling(
    mask: str, throttled: bool | None
) -> None:
    assert nvidia_smi.throttled_from_mask(mask) is throttled


# --- -q -x XML ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu_name", "vram_total", "vram_free", "driver", "temperature", "power"),
    [
        # DTD v13
        (
            "q-x-rtx3090-driver590.xml",
            "NVIDIA GeForce RTX 3090",
            24576,
            24120,
            "590.44.01",
            32,
            35.06,
        ),
        (
            "q-x-rtx-pro-6000-blackwell-maxq.xml",
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            97887,
            31531,
            "590.44.01",
            24,
            3.97,
        ),
        (
            "q-x-rtx4000-sff-ada.xml",
            "NVIDIA RTX 4000 SFF Ada Generation",
            20475,
            16482,
            "595.84",
            38,
            8.81,
        ),
        # DTD v12
        (
            "q-x-rtx3060-driver570.xml",
            "NVIDIA GeForce RTX 3060",
            12288,
            11806,
            "570.124.04",
            42,
            11.6,
        ),
        ("q-x-tesla-t4.xml", "Tesla T4", 15360, 13939, "515.105.01", 40, 26.78),
        ("q-x-quadro-p2000.xml", "Quadro P2000", 5120, 5051, "525.125.06", 34, 4.61),
        # Power draw "N/A" on this card.
        ("q-x-gt1030.xml", "NVIDIA GeForce GT 1030", 1998, 1123, "470.74", 36, None),
        # A driver older than the card names it "Graphics Device": reported as is, not guessed.
        (
            "q-x-gtx1660ti-named-graphics-device.xml",
            "Graphics Device",
            5912,
            5912,
            "418.43",
            40,
            8.93,
        ),
    ],
)
def test_it_reads_single_gpu_xml_reports(
    name: str,
    gpu_name: str,
    vram_total: int,
    vram_free: int,
    driver: str,
    temperature: int,
    power: float | None,
) -> None:
    (gpu,) = nvidia_smi.parse_query_xml(read(name))

    assert gpu.name == gpu_name
    assert (gpu.vram_total_mb, gpu.vram_free_mb) == (vram_total, vram_free)
    assert gpu.driver_version == driver
    assert gpu.temperature_c == temperature
    assert gpu.power_w == power
    assert gpu.utilization_pct == 0
    assert gpu.uuid is not None and gpu.uuid.startswith("GPU-")
    # The XML report carries no compute capability.
    assert gpu.compute_capability is None


@pytest.mark.parametrize(
    ("name", "gpu_name", "free"),
    [
        ("q-x-rtx2070-x2-driver590.xml", "NVIDIA GeForce RTX 2070", (7786, 7786)),
        ("q-x-rtx-a5000-x2-driver590.xml", "NVIDIA RTX A5000", (1678, 6862)),
    ],
)
def test_it_reads_every_gpu_of_a_multi_gpu_xml_report(
    name: str, gpu_name: str, free: tuple[int, int]
) -> None:
    gpus = nvidia_smi.parse_query_xml(read(name))

    assert [gpu.index for gpu in gpus] == [0, 1]
    assert {gpu.name for gpu in gpus} == {gpu_name}
    assert (gpus[0].vram_free_mb, gpus[1].vram_free_mb) == free
    assert gpus[0].uuid == "GPU-12345678-aaaa-bbbb-cccc-0123456789ab"
    assert gpus[1].uuid == "GPU-12345678-aaaa-bbbb-cccc-0123456789cd"


def test_the_xml_index_is_the_bus_order_not_the_minor_number() -> None:
    # In this capture the first GPU (bus 81) has minor number 1 and the second minor number 0.
    first, second = nvidia_smi.parse_query_xml(read("q-x-rtx-a5000-x2-driver590.xml"))

    assert (first.index, first.power_w) == (0, 6.41)
    assert (second.index, second.power_w) == (1, 13.6)


def test_it_reads_instant_power_when_the_average_is_not_available() -> None:
    first, second = nvidia_smi.parse_query_xml(read("q-x-rtx2070-x2-driver590.xml"))

    assert (first.power_w, second.power_w) == (9.23, 11.82)


def test_a_sw_power_cap_alone_is_not_throttling_in_xml() -> None:
    # The RTX 3090 capture has clocks_event_reason_sw_power_cap "Active" and nothing else.
    (gpu,) = nvidia_smi.parse_query_xml(read("q-x-rtx3090-driver590.xml"))

    assert gpu.throttled is False


def test_it_raises_on_broken_xml() -> None:
    text = read("q-x-tesla-t4.xml")

    with pytest.raises(nvidia_smi.ET.ParseError):
        nvidia_smi.parse_query_xml(text[: len(text) // 2])


# --- -q text --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "q-rtx4080super-linux.txt",
            ("NVIDIA GeForce RTX 4080 SUPER", 16376, 15348, "595.71.05", 43, 25.92),
        ),
        (
            "q-rtx4090-x8-first-gpu-only.txt",
            ("NVIDIA GeForce RTX 4090", 24564, 24210, "550.127.05", 28, 20.0),
        ),
        (
            "q-rtx5090-driver570.txt",
            ("NVIDIA GeForce RTX 5090", 32607, 32119, "570.124.06", 25, 24.05),
        ),
    ],
)
def test_it_reads_the_text_report(name: str, expected: tuple) -> None:
    (gpu,) = nvidia_smi.parse_query_text(read(name))

    assert (
        gpu.name,
        gpu.vram_total_mb,
        gpu.vram_free_mb,
        gpu.driver_version,
        gpu.temperature_c,
        gpu.power_w,
    ) == expected
    assert gpu.utilization_pct == 0
    assert gpu.throttled is False
    assert gpu.index == 0


def test_it_reads_the_text_report_with_windows_line_endings() -> None:
    (gpu,) = nvidia_smi.parse_query_text(crlf(read("q-rtx4090-x8-first-gpu-only.txt")))

    assert gpu.uuid == "GPU-8ee5f1e0-e705-aac5-6d6e-b97ad59601ef"
    assert gpu.vram_total_mb == 24564


# --- default table and -L -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "count", "gpu_name", "vram", "driver"),
    [
        ("table-rtx4090-x8-driver550.txt", 8, "NVIDIA GeForce RTX 4090", 24564, "550.127.05"),
        (
            "table-rtx6000ada-x8-truncated-names.txt",
            8,
            "NVIDIA RTX 6000 Ada Gene...",
            49140,
            "550.127.05",
        ),
        ("table-rtx-a6000-x9.txt", 9, "NVIDIA RTX A6000", 46068, "550.127.05"),
        ("table-tesla-v100-sxm2-x8.txt", 8, "Tesla V100-SXM2-16GB", 16384, "550.127.05"),
        ("table-rtx5090-driver570.txt", 1, "NVIDIA GeForce RTX 5090", 32607, "570.124.06"),
        ("table-gtx1050ti-driver535.txt", 1, "NVIDIA GeForce GTX 1050 Ti", 4096, "535.161.07"),
        ("table-rtx4080super-linux.txt", 1, "NVIDIA GeForce RTX 4080 ...", 16376, "595.71.05"),
        # Windows: "KMD Version" instead of "Driver Version", WDDM instead of persistence mode.
        ("table-rtx2080super-windows.txt", 1, "NVIDIA GeForce RTX 2080 ...", 8192, "610.62"),
        # Pre-525 79-column layout.
        ("table-gtx680-driver470-old-layout.txt", 1, "NVIDIA GeForce ...", 2000, "470.256.02"),
    ],
)
def test_it_reads_every_gpu_box_of_the_table(
    name: str, count: int, gpu_name: str, vram: int, driver: str
) -> None:
    gpus = nvidia_smi.parse_table(read(name))

    assert [gpu.index for gpu in gpus] == list(range(count))
    assert {gpu.name for gpu in gpus} == {gpu_name}
    assert {gpu.vram_total_mb for gpu in gpus} == {vram}
    assert {gpu.driver_version for gpu in gpus} == {driver}
    # Used + free falls short of total by a reserve the table does not show.
    assert {gpu.vram_free_mb for gpu in gpus} == {None}


def test_it_reads_per_gpu_figures_from_the_table_and_na_as_unknown() -> None:
    v100 = nvidia_smi.parse_table(read("table-tesla-v100-sxm2-x8.txt"))
    (gtx680,) = nvidia_smi.parse_table(read("table-gtx680-driver470-old-layout.txt"))
    (gtx1050,) = nvidia_smi.parse_table(read("table-gtx1050ti-driver535.txt"))

    assert [(gpu.temperature_c, gpu.power_w) for gpu in v100[:3]] == [
        (37, 45.0),
        (40, 40.0),
        (39, 39.0),
    ]
    # "N/A /  N/A" power and "N/A" GPU-Util on the old layout.
    assert (gtx680.temperature_c, gtx680.power_w, gtx680.utilization_pct) == (35, None, None)
    # "N/A /  75W": no reading, only a cap.
    assert (gtx1050.power_w, gtx1050.utilization_pct) == (None, 0)


def test_it_reads_the_table_with_windows_line_endings() -> None:
    gpus = nvidia_smi.parse_table(crlf(read("table-rtx-a6000-x9.txt")))

    assert len(gpus) == 9


def test_it_lists_gpus_with_full_names_and_uuids() -> None:
    gpus = nvidia_smi.parse_list(read("list-L-rtx3090-x4.txt"))

    assert [gpu.index for gpu in gpus] == [0, 1, 2, 3]
    assert {gpu.name for gpu in gpus} == {"NVIDIA GeForce RTX 3090"}
    assert gpus[0].uuid == "GPU-e1924eea-b9bb-d537-39f2-b345087fa145"
    assert gpus[3].uuid == "GPU-2639988f-1756-0583-db8f-faee38effce2"


def test_it_lists_the_physical_gpu_not_its_mig_instances() -> None:
    (gpu,) = nvidia_smi.parse_list(read("list-L-h100-mig.txt"))

    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.uuid == "GPU-00000000-0000-0000-0000-000000000000"


def test_list_names_replace_the_tables_cut_names() -> None:
    # One machine's table (cut names) and -L (full names) from the same capture series.
    table = nvidia_smi.parse_table(read("table-rtx4080super-linux.txt"))
    listed = [GPU(index=0, name="NVIDIA GeForce RTX 4080 SUPER", vendor="nvidia", uuid="GPU-0")]

    (gpu,) = nvidia_smi.merge_table_and_list(table, listed)

    assert gpu.name == "NVIDIA GeForce RTX 4080 SUPER"
    assert gpu.uuid == "GPU-0"
    assert gpu.vram_total_mb == 16376


def test_a_gpu_only_listed_by_l_is_kept_when_merging() -> None:
    table = nvidia_smi.parse_table(read("table-rtx5090-driver570.txt"))
    listed = nvidia_smi.parse_list(read("list-L-rtx3090-x4.txt"))

    merged = nvidia_smi.merge_table_and_list(table, listed)

    assert [gpu.index for gpu in merged] == [0, 1, 2, 3]
    assert merged[0].vram_total_mb == 32607
    assert merged[1].vram_total_mb is None
