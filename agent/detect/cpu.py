"""Parsers for Linux CPU descriptions: ``/proc/cpuinfo`` and ``lscpu``.

x86 lists its instruction-set extensions as ``flags`` (``avx avx2 avx512f``); aarch64 lists
``Features`` (``fp asimd sve``) and has no AVX of any kind, so its AVX fields are ``False``,
not unknown.
"""

from __future__ import annotations

import re

from agent.detect.model import CPU
from agent.detect.values import squash_spaces, to_int

_ARM_ARCHES = ("aarch64", "arm64", "armv7l", "armv8l", "armv6l")
_LSCPU_LABEL = re.compile(r"^(\S[^:]*):\s*")


def parse_cpuinfo(text: str) -> CPU:
    """Parse ``/proc/cpuinfo``: model and extensions from the first entry, counts from all."""
    entries = _cpuinfo_entries(text)
    if not entries:
        return CPU()
    first = entries[0]
    avx = avx2 = avx512 = None
    if "flags" in first:
        avx, avx2, avx512 = _x86_extensions(first["flags"])
    elif "features" in first:
        avx = avx2 = avx512 = False
    # x86 describes each package ("physical id") by its cores and threads ("siblings"); that
    # stays right even when only some entries are present. Other architectures only list CPUs.
    packages: dict[str, tuple[int | None, int | None]] = {}
    for entry in entries:
        if "physical id" in entry:
            packages[entry["physical id"]] = (
                to_int(entry.get("cpu cores")),
                to_int(entry.get("siblings")),
            )
    cores = [count for count, _ in packages.values()]
    threads = [count for _, count in packages.values()]
    return CPU(
        model=squash_spaces(first.get("model name")),
        physical_cores=_total(cores) if packages else None,
        logical_cores=_total(threads) if packages else len(entries),
        avx=avx,
        avx2=avx2,
        avx512=avx512,
    )


def _cpuinfo_entries(text: str) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        # Keys are padded with tabs or (in copies) spaces, so split on ":" and strip.
        key, colon, value = line.partition(":")
        if not colon:
            continue
        key = key.strip().lower()
        # A new "processor" line starts an entry even without the usual blank line before it.
        if key == "processor" or not entries:
            entries.append({})
        entries[-1].setdefault(key, value.strip())
    return entries


def parse_lscpu(text: str) -> CPU:
    """Parse ``lscpu``, including output hard-wrapped by a terminal (long ``Flags`` lines)."""
    fields = _lscpu_fields(text)
    arch = fields.get("architecture")
    flags = fields.get("flags")
    if flags is not None:
        avx, avx2, avx512 = _x86_extensions(flags)
    elif arch in _ARM_ARCHES:
        avx = avx2 = avx512 = False
    else:
        avx = avx2 = avx512 = None
    per_socket = to_int(fields.get("core(s) per socket") or fields.get("core(s) per cluster"))
    sockets = to_int(fields.get("socket(s)") or fields.get("cluster(s)"))
    return CPU(
        model=squash_spaces(fields.get("model name")),
        arch=arch,
        physical_cores=per_socket * sockets if per_socket and sockets else None,
        logical_cores=to_int(fields.get("cpu(s)")),
        avx=avx,
        avx2=avx2,
        avx512=avx512,
    )


def _lscpu_fields(text: str) -> dict[str, str]:
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    labels = [_LSCPU_LABEL.match(line) for line in lines]
    if not labels or labels[0] is None:
        return {}
    # lscpu starts every value in one column. A line whose "Label:" does not reach that column
    # is the rest of the previous value, cut mid-word by the terminal, so it is joined back as is.
    value_column = labels[0].end()
    fields: dict[str, str] = {}
    key = None
    for line, label in zip(lines, labels, strict=True):
        if label is not None and label.end() in (value_column, len(line)):
            key = label.group(1).strip().lower()
            fields[key] = line[label.end() :]
        elif key is not None:
            fields[key] += line
    return {name: value.strip() for name, value in fields.items()}


def _x86_extensions(flags: str) -> tuple[bool, bool, bool]:
    words = set(flags.split())
    return "avx" in words, "avx2" in words, "avx512f" in words


def _total(counts: list[int | None]) -> int | None:
    known = [count for count in counts if count is not None]
    return sum(known) if known and len(known) == len(counts) else None
