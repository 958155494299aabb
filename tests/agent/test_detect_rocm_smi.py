"""rocm-smi parsers against recorded real outputs (tests/agent/fixtures/hardware/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.detect import rocm_smi

FIXTURES = Path(__file__).parent / "fixtures" / "hardware" / "rocm-smi"


def read(name: str) -> str:
    with (FIXTURES / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


def test_it_reads_four_mi100s_and_skips_the_system_block() -> None:
    gpus = rocm_smi.parse_json(read("mi100-x4-rocm602-full.json"))

    assert [gpu.index for gpu in gpus] == [0, 1, 2, 3]
    assert {gpu.name for gpu in gpus} == {"Arcturus GL-XL [Instinct MI100]"}
    assert {gpu.vendor for gpu in gpus} == {"amd"}
    # 34342961152 B of VRAM, 6750208 B used.
    assert {gpu.vram_total_mb for gpu in gpus} == {32752}
    assert {gpu.vram_free_mb for gpu in gpus} == {32746}
    assert {gpu.driver_version for gpu in gpus} == {"6.3.6"}
    assert [gpu.temperature_c for gpu in gpus] == [53, 55, 54, 51]
    assert [gpu.power_w for gpu in gpus] == [36.0, 44.0, 43.0, 39.0]
    assert gpus[0].uuid == "0x79ccd55167a2124a"
    # AMD has no CUDA compute capability.
    assert {gpu.compute_capability for gpu in gpus} == {None}


@pytest.mark.parametrize(
    ("name", "free"),
    [
        # ROCm 5.7.1 keys: "Card series", "GPU ID".
        ("rx6700xt-rocm571-full.json", 10780),
        # ROCm 6.1.2 keys: "Card Series", "Device Name" (a file that starts with a blank line).
        ("rx6700xt-rocm612-full.json", 10773),
    ],
)
def test_it_reads_both_generations_of_key_names(name: str, free: int) -> None:
    (gpu,) = rocm_smi.parse_json(read(name))

    assert gpu.name == "Navi 22 [Radeon RX 6700/6700 XT / 6800M]"
    assert gpu.vram_total_mb == 12272
    assert gpu.vram_free_mb == free
    assert gpu.driver_version == "6.3.6"
    assert (gpu.temperature_c, gpu.power_w, gpu.utilization_pct) == (45, 6.0, 0)
    # "Unique ID": "N/A"
    assert gpu.uuid is None


def test_it_reads_the_raw_single_line_json_with_missing_vram() -> None:
    (gpu,) = rocm_smi.parse_json(read("mi250-rocm5-a-json-single-line.json"))

    assert gpu.name == "AMD INSTINCT MI250 (MCM) OAM AC MBA"
    assert gpu.driver_version == "6.2.4"
    assert (gpu.temperature_c, gpu.power_w) == (32, 89.0)
    assert gpu.uuid == "0x719d230578348e8c"
    # This capture has no VRAM fields: unknown, not zero.
    assert gpu.vram_total_mb is None
    assert gpu.vram_free_mb is None


def test_it_counts_cards_even_when_they_only_report_memory_use() -> None:
    gpus = rocm_smi.parse_json(read("rx6800-x2-showmemuse-rocm-smi-1.4.1.json"))

    assert [gpu.index for gpu in gpus] == [0, 1]
    assert {gpu.name for gpu in gpus} == {None}
    assert {gpu.vram_total_mb for gpu in gpus} == {None}


def test_json_and_csv_of_the_same_card_agree() -> None:
    (from_json,) = rocm_smi.parse_json(read("rx7900xt-productname-use-vram.json"))
    (from_csv,) = rocm_smi.parse_csv(read("rx7900xt-productname-use-vram.csv"))

    assert from_json == from_csv
    assert from_json.name == "Radeon RX 7900 XT"
    # 21458059264 B total, 27856896 B used.
    assert (from_json.vram_total_mb, from_json.vram_free_mb) == (20464, 20438)
    assert from_json.utilization_pct == 0


def test_it_reads_a_discrete_and_an_integrated_gpu_from_csv() -> None:
    dgpu, igpu = rocm_smi.parse_csv(
        read("rx6800-family-plus-raphael-igpu-productname-vram-uniqueid.csv")
    )

    assert (dgpu.index, dgpu.name) == (0, "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]")
    assert (dgpu.vram_total_mb, dgpu.vram_free_mb) == (16368, 15708)
    assert (igpu.index, igpu.name) == (1, "Raphael")
    assert (igpu.vram_total_mb, igpu.vram_free_mb) == (64, 40)
    assert igpu.uuid is None


def test_it_reads_csv_with_windows_line_endings() -> None:
    text = read("rx7900xt-productname-use-vram.csv").replace("\n", "\r\n")

    (gpu,) = rocm_smi.parse_csv(text)

    assert gpu.name == "Radeon RX 7900 XT"


def test_a_bare_device_id_is_not_taken_for_a_product_name() -> None:
    # "Card series: 0x744c": the PCI device id of an RX 7900 XTX, not a name.
    (gpu,) = rocm_smi.parse_text(read("rx7900xtx-showproductname-hex-series.txt"))

    assert gpu.index == 0
    assert gpu.vendor == "amd"
    assert gpu.name is None


def test_it_starts_reading_json_at_the_first_brace() -> None:
    text = "WARNING: AMD GPU device(s) is/are in a low-power state.\n" + read(
        "rx7900xt-productname-use-vram.json"
    )

    (gpu,) = rocm_smi.parse_json(text)

    assert gpu.name == "Radeon RX 7900 XT"


def test_it_raises_on_output_that_is_not_json() -> None:
    with pytest.raises(json.JSONDecodeError):
        rocm_smi.parse_json(read("rx7900xtx-showproductname-hex-series.txt"))
