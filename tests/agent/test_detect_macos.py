"""macOS parsers against recorded real outputs (tests/agent/fixtures/hardware/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.detect import macos
from agent.detect.model import CPU

FIXTURES = Path(__file__).parent / "fixtures" / "hardware"


def read(name: str) -> str:
    with (FIXTURES / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


# --- SPDisplaysDataType ---------------------------------------------------------------------------


def test_an_apple_silicon_gpu_reports_unified_memory_not_vram() -> None:
    # One GPU, three attached displays: the displays are not GPUs.
    (gpu,) = macos.parse_displays_json(
        read("system_profiler/m1pro-displays-builtin-plus-2-external.json")
    )

    assert gpu.name == "Apple M1 Pro"
    assert gpu.vendor == "apple"
    assert gpu.source == "system_profiler"
    assert gpu.unified_memory is True
    assert gpu.vram_total_mb is None
    assert gpu.vram_free_mb is None


def test_the_model_name_wins_over_an_internal_item_name() -> None:
    # Older macOS: "_name": "kHW_AppleM1Item", "sppci_model": "Apple M1".
    (gpu,) = macos.parse_displays_json(read("system_profiler/m1-displays-reindented.json"))

    assert gpu.name == "Apple M1"
    assert gpu.unified_memory is True


def test_a_virtual_gpu_with_its_own_vram_reports_it() -> None:
    (gpu,) = macos.parse_displays_json(
        read("system_profiler/intel-mac-vm-github-runner-paravirtual-displays.json")
    )

    assert gpu.name == "Apple Paravirtualized Graphics Device"
    assert gpu.vram_total_mb == 64
    assert gpu.unified_memory is False


def test_it_reads_a_discrete_gpu_from_the_text_report() -> None:
    (gpu,) = macos.parse_displays_text(
        read("system_profiler/imacpro-radeon-pro-vega64-displays.txt")
    )

    assert gpu.name == "Radeon Pro Vega 64"
    assert gpu.vendor == "amd"
    # "VRAM (Total): 16 GB"
    assert gpu.vram_total_mb == 16384
    assert gpu.unified_memory is False


# --- SPHardwareDataType ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model", "cores", "ram_mb"),
    [
        ("m5max-hardware.json", "Apple M5 Max", 18, 131072),  # "proc 18:6:0:12"
        ("m1-macbookair-hardware.json", "Apple M1", 8, 16384),  # "proc 8:4:4"
        ("m1-virtual-github-runner-hardware.json", "Apple M1 (Virtual)", 3, 7168),  # integer 3
    ],
)
def test_it_reads_apple_silicon_hardware(name: str, model: str, cores: int, ram_mb: int) -> None:
    host = macos.parse_hardware_json(read(f"system_profiler/{name}"))

    assert host.cpu == CPU(
        model=model, arch="arm64", physical_cores=cores, avx=False, avx2=False, avx512=False
    )
    assert host.ram_mb == ram_mb


def test_it_reads_intel_mac_hardware_without_claiming_flags() -> None:
    host = macos.parse_hardware_json(read("system_profiler/intel-imacpro-xeon-w-hardware.json"))

    assert host.cpu.model == "8-Core Intel Xeon W"
    assert host.cpu.physical_cores == 8
    assert host.ram_mb == 32768
    # Nothing in this report says which AVX levels the Xeon W has.
    assert (host.cpu.arch, host.cpu.avx, host.cpu.avx512) == (None, None, None)


def test_it_reads_the_hardware_text_report() -> None:
    host = macos.parse_hardware_text(
        read("system_profiler/m3-macbookair-hardware-text-as-posted.txt")
    )

    assert host.cpu.model == "Apple M3"
    # "Total Number of Cores: 8 (4 performance and 4 efficiency)"
    assert host.cpu.physical_cores == 8
    assert host.cpu.avx2 is False
    assert host.ram_mb == 16384


# --- sysctl ---------------------------------------------------------------------------------------


def test_it_reads_a_full_sysctl_dump() -> None:
    host = macos.parse_sysctl(read("sysctl/darwin-m2-monterey.txt"))

    assert host.cpu == CPU(
        model="Apple M2",
        arch="arm64",
        physical_cores=8,
        logical_cores=8,
        avx=False,
        avx2=False,
        avx512=False,
    )
    assert host.ram_mb == 16384


def test_it_reads_performance_and_efficiency_cores() -> None:
    host = macos.parse_sysctl(read("sysctl/darwin-m3-max-sequoia.txt"))

    assert host.cpu.model == "Apple M3 Max"
    assert (host.cpu.physical_cores, host.cpu.logical_cores) == (14, 14)
    # 38654705664 B: 36 GB of unified memory.
    assert host.ram_mb == 36864


def test_a_trimmed_dump_leaves_unlisted_facts_unknown() -> None:
    host = macos.parse_sysctl(read("sysctl/darwin-m1-virtual-github-runner-subset.txt"))

    assert host.cpu.model == "Apple M1 (Virtual)"
    # Only hw.perflevel0.physicalcpu is listed.
    assert host.cpu.physical_cores == 3
    assert host.cpu.logical_cores is None
    # No hw.optional.arm64 in this subset: the architecture is not stated, so nor are flags.
    assert (host.cpu.arch, host.cpu.avx) == (None, None)
    assert host.ram_mb == 7168
