"""Parsers for macOS tools: ``system_profiler`` (displays, hardware; JSON and text) and ``sysctl``.

Apple Silicon GPUs have no VRAM of their own: they share the system's unified memory with the
CPU. They are reported with ``vram_total_mb`` null and ``unified_memory`` set, never with the
RAM size passed off as VRAM; detection adds a note saying how much memory they share.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agent.detect.model import CPU, GPU
from agent.detect.values import clean, to_bytes_mib, to_int, to_mib

SOURCE = "system_profiler"

_DEDICATED_VRAM_KEYS = ("spdisplays_vram", "_spdisplays_vram", "vram (total)", "vram")
_SHARED_VRAM_KEYS = ("spdisplays_vram_shared", "vram (dynamic, max)", "vram (shared)")
_VENDORS = (("nvidia", "nvidia"), ("amd", "amd"), ("ati", "amd"), ("intel", "intel"))
_LEADING_INT = re.compile(r"(\d+)")


@dataclass
class MacHost:
    cpu: CPU
    ram_mb: int | None


# --- SPDisplaysDataType ------------------------------------------------------------------------


def parse_displays_json(text: str) -> list[GPU]:
    """Parse ``system_profiler SPDisplaysDataType -json``."""
    items = json.loads(text).get("SPDisplaysDataType", [])
    gpus = []
    for index, item in enumerate(items):
        fields = {str(key).lower(): value for key, value in item.items()}
        # Older macOS names Apple GPUs "kHW_AppleM1Item" in _name; sppci_model is the real name.
        name = clean(fields.get("sppci_model")) or clean(fields.get("_name"))
        gpus.append(_display_gpu(index, name, fields.get("spdisplays_vendor"), fields))
    return gpus


def parse_displays_text(text: str) -> list[GPU]:
    """Parse ``system_profiler SPDisplaysDataType`` (indented ``Key: value`` text)."""
    blocks: list[tuple[str, dict[str, str]]] = []
    block_indent = field_indent = None
    for line in text.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        if not stripped or stripped == "Graphics/Displays:":
            continue
        indent = len(line) - len(line.lstrip())
        if block_indent is None or indent == block_indent:
            if stripped.endswith(":"):
                block_indent, field_indent = indent, None
                blocks.append((stripped[:-1], {}))
            continue
        if field_indent is None:
            field_indent = indent
        key, _, value = stripped.partition(":")
        # Deeper lines belong to the attached displays, not to the GPU.
        if indent == field_indent and value.strip():
            blocks[-1][1][key.strip().lower()] = value.strip()
    return [
        _display_gpu(index, fields.get("chipset model") or title, fields.get("vendor"), fields)
        for index, (title, fields) in enumerate(blocks)
    ]


def _display_gpu(index: int, name: str | None, vendor_text: object, fields: dict) -> GPU:
    vendor = _vendor(vendor_text)
    dedicated = next((to_mib(fields[k]) for k in _DEDICATED_VRAM_KEYS if k in fields), None)
    shared = any(key in fields for key in _SHARED_VRAM_KEYS)
    return GPU(
        index=index,
        name=name,
        vendor=vendor,
        vram_total_mb=dedicated,
        source=SOURCE,
        unified_memory=dedicated is None and (shared or vendor == "apple"),
    )


def _vendor(text: object) -> str | None:
    lowered = str(text or "").lower()
    # "sppci_vendor_Apple", "AMD (0x1002)", "Intel", "NVIDIA (0x10de)"
    if "apple" in lowered:
        return "apple"
    words = set(re.split(r"[^a-z]+", lowered))
    return next((vendor for word, vendor in _VENDORS if word in words), None)


# --- SPHardwareDataType ------------------------------------------------------------------------


def parse_hardware_json(text: str) -> MacHost:
    """Parse ``system_profiler SPHardwareDataType -json``.

    ``number_processors`` is an integer on Intel Macs and ``"proc 18:6:0:12"`` (total first)
    on Apple Silicon.
    """
    items = json.loads(text).get("SPHardwareDataType", [])
    fields = items[0] if items else {}
    chip = clean(fields.get("chip_type"))
    return MacHost(
        cpu=_hardware_cpu(
            chip=chip,
            model=chip or clean(fields.get("cpu_type")),
            cores=fields.get("number_processors"),
        ),
        ram_mb=to_mib(fields.get("physical_memory")),
    )


def parse_hardware_text(text: str) -> MacHost:
    """Parse ``system_profiler SPHardwareDataType`` (``Chip: Apple M3``, ``Memory: 16 GB``)."""
    fields: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        key, _, value = line.partition(":")
        if value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    chip = clean(fields.get("chip"))
    return MacHost(
        cpu=_hardware_cpu(
            chip=chip,
            model=chip or clean(fields.get("processor name")),
            cores=fields.get("total number of cores"),
        ),
        ram_mb=to_mib(fields.get("memory")),
    )


def _hardware_cpu(*, chip: str | None, model: str | None, cores: object) -> CPU:
    match = _LEADING_INT.search(str(cores)) if cores is not None else None
    # Only Apple Silicon Macs report a "chip"; those are arm64 and have no AVX at all.
    no_x86_flags = False if chip else None
    return CPU(
        model=model,
        arch="arm64" if chip else None,
        physical_cores=int(match.group(1)) if match else None,
        avx=no_x86_flags,
        avx2=no_x86_flags,
        avx512=no_x86_flags,
    )


# --- sysctl ------------------------------------------------------------------------------------


def parse_sysctl(text: str) -> MacHost:
    """Parse a ``sysctl hw machdep`` dump (``key: value`` lines)."""
    values: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        key, _, value = line.partition(":")
        if key.strip():
            values[key.strip()] = value.strip()
    return MacHost(cpu=_sysctl_cpu(values), ram_mb=to_bytes_mib(values.get("hw.memsize")))


def _sysctl_cpu(values: dict[str, str]) -> CPU:
    arch = None
    if values.get("hw.optional.arm64") == "1":
        arch = "arm64"
    elif values.get("hw.optional.x86_64") == "1":
        arch = "x86_64"
    physical = to_int(values.get("hw.physicalcpu"))
    if physical is None:
        # Trimmed dumps only list the per-cluster counts (performance, efficiency).
        levels = to_int(values.get("hw.nperflevels")) or 0
        counts = [to_int(values.get(f"hw.perflevel{n}.physicalcpu")) for n in range(levels)]
        known = [count for count in counts if count is not None]
        physical = sum(known) if known and len(known) == len(counts) else None
    logical = to_int(values.get("hw.logicalcpu")) or to_int(values.get("hw.ncpu"))
    return CPU(
        model=clean(values.get("machdep.cpu.brand_string")),
        arch=arch,
        physical_cores=physical,
        logical_cores=logical,
        avx=_sysctl_flag(values, arch, "hw.optional.avx1_0", "machdep.cpu.features", "AVX1.0"),
        avx2=_sysctl_flag(values, arch, "hw.optional.avx2_0", "machdep.cpu.leaf7_features", "AVX2"),
        avx512=_sysctl_flag(
            values, arch, "hw.optional.avx512f", "machdep.cpu.leaf7_features", "AVX512F"
        ),
    )


def _sysctl_flag(
    values: dict[str, str], arch: str | None, key: str, feature_key: str, feature: str
) -> bool | None:
    if arch == "arm64":
        return False
    if key in values:
        return values[key] == "1"
    if feature_key in values:
        return feature in values[feature_key].split()
    return None
