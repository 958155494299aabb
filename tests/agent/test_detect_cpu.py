"""/proc/cpuinfo and lscpu parsers against recorded real outputs (fixtures/hardware/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.detect import cpu
from agent.detect.model import CPU

FIXTURES = Path(__file__).parent / "fixtures" / "hardware"


def read(name: str) -> str:
    with (FIXTURES / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "xeon-platinum-8480plus-sapphirerapids-avx512-amx.txt",
            CPU(model="Intel(R) Xeon(R) Platinum 8480+", physical_cores=56, logical_cores=112,
                avx=True, avx2=True, avx512=True),
        ),
        (
            "epyc-9654-zen4-avx512.txt",
            CPU(model="AMD EPYC 9654 96-Core Processor", physical_cores=96, logical_cores=96,
                avx=True, avx2=True, avx512=True),
        ),
        (
            "ryzen9-9950x-zen5-avx512.txt",
            CPU(model="AMD Ryzen 9 9950X 16-Core Processor", physical_cores=16, logical_cores=32,
                avx=True, avx2=True, avx512=True),
        ),
        (
            "core-ultra9-285-arrowlake-avx2-no-avx512.txt",
            CPU(model="Intel(R) Core(TM) Ultra 9 285", physical_cores=24, logical_cores=24,
                avx=True, avx2=True, avx512=False),
        ),
        (
            "xeon-gold-6132-skylake-avx512.txt",
            CPU(model="Intel(R) Xeon(R) Gold 6132 CPU @ 2.60GHz", physical_cores=14,
                logical_cores=14, avx=True, avx2=True, avx512=True),
        ),
        (
            # Two of four entries: the package's "cpu cores" and "siblings" still say 2 and 4.
            "x86-core-i5-5200u-avx2-first-2-of-4-cpus.txt",
            CPU(model="Intel(R) Core(TM) i5-5200U CPU @ 2.20GHz", physical_cores=2,
                logical_cores=4, avx=True, avx2=True, avx512=False),
        ),
    ],
)  # fmt: skip
def test_it_reads_x86_cpuinfo(name: str, expected: CPU) -> None:
    assert cpu.parse_cpuinfo(read(f"cpuinfo/{name}")) == expected


@pytest.mark.parametrize(
    ("name", "entries"),
    [
        ("aarch64-neoverse-v2-grace-sve2.txt", 1),
        ("aarch64-apple-m2-asahi.txt", 1),
        # Committed without the blank line between the two entries.
        ("aarch64-graviton2-neoverse-n1-2cpu.txt", 2),
        # Real tabs between key and colon.
        ("aarch64-apm-emag-kvm-guest-rhel9-2cpu.txt", 2),
    ],
)
def test_aarch64_cpuinfo_has_no_avx_and_no_model_name(name: str, entries: int) -> None:
    found = cpu.parse_cpuinfo(read(f"cpuinfo/{name}"))

    assert (found.avx, found.avx2, found.avx512) == (False, False, False)
    assert found.logical_cores == entries
    # aarch64 cpuinfo has implementer/part codes, no name; lscpu supplies it.
    assert found.model is None
    assert found.physical_cores is None


def test_it_reads_cpuinfo_with_windows_line_endings_and_spaces_for_tabs() -> None:
    text = read("cpuinfo/epyc-9654-zen4-avx512.txt").replace("\t", "  ").replace("\n", "\r\n")

    found = cpu.parse_cpuinfo(text)

    assert found.model == "AMD EPYC 9654 96-Core Processor"
    assert found.avx512 is True


def test_empty_cpuinfo_is_all_unknown() -> None:
    assert cpu.parse_cpuinfo("") == CPU()


def test_it_reads_lscpu_on_aarch64() -> None:
    found = cpu.parse_lscpu(read("lscpu/aarch64-graviton2-neoverse-n1.txt"))

    assert found == CPU(
        model="Neoverse-N1",
        arch="aarch64",
        physical_cores=2,
        logical_cores=2,
        avx=False,
        avx2=False,
        avx512=False,
    )


def test_it_reads_lscpu_for_two_sockets_and_squashes_the_model_name() -> None:
    found = cpu.parse_lscpu(read("lscpu/x86-xeon-x5680-rhel9.txt"))

    # "Intel(R) Xeon(R) CPU           X5680  @ 3.33GHz" with its padding collapsed.
    assert found.model == "Intel(R) Xeon(R) CPU X5680 @ 3.33GHz"
    assert found.arch == "x86_64"
    assert (found.physical_cores, found.logical_cores) == (12, 12)
    # Westmere: no AVX at all.
    assert (found.avx, found.avx2, found.avx512) == (False, False, False)


def test_it_joins_lscpu_values_that_a_terminal_wrapped() -> None:
    found = cpu.parse_lscpu(read("lscpu/x86-core-i5-5200u-wrapped-at-120-cols.txt"))

    # "avx2" sits on the fifth line of a Flags value wrapped mid-word.
    assert found == CPU(
        model="Intel(R) Core(TM) i5-5200U CPU @ 2.20GHz",
        arch="x86_64",
        physical_cores=2,
        logical_cores=4,
        avx=True,
        avx2=True,
        avx512=False,
    )


def test_wrapped_lscpu_lines_join_back_without_breaking_words() -> None:
    fields = cpu._lscpu_fields(read("lscpu/x86-core-i5-5200u-wrapped-at-120-cols.txt"))

    flags = fields["flags"].split()
    assert {"acpi", "xtopology", "sse4_1", "invpcid_single", "bmi2"} <= set(flags)
    assert fields["vulnerability spectre v2"].endswith("STIBP conditional, RSB filling")
    assert fields["cpu(s)"] == "4"
