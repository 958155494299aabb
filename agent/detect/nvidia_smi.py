"""Parsers for ``nvidia-smi`` output: pure functions from the tool's text to a list of GPU.

Formats, from most to least informative:

- ``--query-gpu=<fields> --format=csv[,noheader][,nounits]``: the agent's main source when NVML
  is missing. With a header, columns are mapped by the header's names (units in brackets
  stripped, alias names folded); without one, by the field list that was asked for.
- ``-q -x``: XML, DTD v12 (``power_readings``, ``clocks_throttle_reasons``) and v13
  (``gpu_power_readings``, ``clocks_event_reasons``). It has no compute capability.
- ``-q``: the same report as indented text.
- the default table and ``-L``: last resorts for names and VRAM. Table names are cut to fit their
  column (``NVIDIA GeForce RTX 4080 ...``); ``-L`` has the full names, so the two are merged.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from agent.detect.model import GPU
from agent.detect.values import clean, to_float, to_int, to_mib

SOURCE = "nvidia-smi"

# The query the agent sends. The throttle mask is asked for under its old name, which every
# driver accepts; drivers from 535 on answer with the new name (clocks_event_reasons.active).
QUERY_FIELDS: tuple[str, ...] = (
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
    "clocks_throttle_reasons.active",
)

# nvidia-smi accepts several names for one field; each maps to the name we read below.
FIELD_ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
    "gpu_bus_id": "pci.bus_id",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "clocks.gr": "clocks.current.graphics",
    "clocks.mem": "clocks.current.memory",
    "clocks.sm": "clocks.current.sm",
}

# NVML clock-event bits that mean the GPU is slowed by heat or by a hardware power brake.
# SW power cap (0x4) is left out on purpose: a busy GPU sits at its power limit by design.
HW_SLOWDOWN = 0x8
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
THROTTLE_MASK = HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN
_THROTTLE_REASON_NAMES = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "sw_thermal_slowdown",
    "hw_power_brake_slowdown",
)

_UNIT_SUFFIX = re.compile(r"\s*\[[^\]]*\]\s*$")
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def canonical_field(name: str) -> str:
    """``"memory.total [MiB]"`` → ``"memory.total"``; aliases folded to one name."""
    bare = _UNIT_SUFFIX.sub("", name).strip().lower()
    return FIELD_ALIASES.get(bare, bare)


def invalid_field(output: str) -> str | None:
    """The field an older or newer driver refused, from its error message."""
    match = _INVALID_FIELD.search(output)
    return match.group(1) if match else None


def throttled_from_mask(value: object) -> bool | None:
    """Whether a clock-event bitmask (``0x0000000000000040``) holds a thermal/power slowdown."""
    text = clean(value)
    if text is None:
        return None
    try:
        mask = int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None
    return bool(mask & THROTTLE_MASK)


def throttled_from_flags(flags: dict[str, str | None]) -> bool | None:
    """Whether any slowdown reason reads "Active"; None when no reason was reported."""
    states = [clean(flags.get(reason)) for reason in _THROTTLE_REASON_NAMES]
    known = [state.lower() for state in states if state is not None]
    if not known:
        return None
    return any(state == "active" for state in known)


# --- --query-gpu CSV ---------------------------------------------------------------------------


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> list[GPU]:
    """Parse ``--query-gpu`` CSV. ``fields`` is the query's field list when run with noheader."""
    rows = [
        row
        for row in csv.reader(io.StringIO(_unix_lines(text)), skipinitialspace=True)
        if any(cell.strip() for cell in row)
    ]
    if fields is None:
        if not rows:
            return []
        header, rows = rows[0], rows[1:]
    else:
        header = list(fields)
    keys = [canonical_field(name) for name in header]
    gpus = []
    for position, row in enumerate(rows):
        # A row of another width is an error line (e.g. "Unable to determine the device handle").
        if len(row) != len(keys):
            continue
        record = dict(zip(keys, row, strict=True))
        reasons = {
            reason: record.get(f"clocks_event_reasons.{reason}")
            for reason in _THROTTLE_REASON_NAMES
        }
        throttled = throttled_from_mask(record.get("clocks_event_reasons.active"))
        gpus.append(
            GPU(
                index=_index(record.get("index"), position),
                name=clean(record.get("name")),
                vendor="nvidia",
                uuid=clean(record.get("uuid")),
                vram_total_mb=to_mib(record.get("memory.total")),
                vram_free_mb=to_mib(record.get("memory.free")),
                compute_capability=clean(record.get("compute_cap")),
                driver_version=clean(record.get("driver_version"))
                or clean(record.get("kmd_version")),
                utilization_pct=to_int(record.get("utilization.gpu")),
                temperature_c=to_int(record.get("temperature.gpu")),
                power_w=_watts(record.get("power.draw")),
                source=SOURCE,
                throttled=throttled if throttled is not None else throttled_from_flags(reasons),
            )
        )
    return gpus


# --- -q -x XML ---------------------------------------------------------------------------------

_XML_KEYS = {
    "name": "product_name",
    "uuid": "uuid",
    "vram_total": "fb_memory_usage/total",
    "vram_free": "fb_memory_usage/free",
    "utilization": "utilization/gpu_util",
    "temperature": "temperature/gpu_temp",
}
_XML_POWER_PATHS = tuple(
    f"{section}/{reading}"
    for section in ("gpu_power_readings", "power_readings")
    for reading in ("power_draw", "average_power_draw", "instant_power_draw")
)


def parse_query_xml(text: str) -> list[GPU]:
    """Parse ``nvidia-smi -q -x``; raises ``xml.etree.ElementTree.ParseError`` on broken XML."""
    # The text comes from the local nvidia-smi binary, and ElementTree resolves no external
    # entities, so the stdlib parser is safe here.
    root = ET.fromstring(text.strip())  # noqa: S314
    driver = clean(root.findtext("driver_version"))
    gpus = []
    # nvidia-smi indexes GPUs in PCI bus order, the order of the <gpu> elements; <minor_number>
    # is the /dev/nvidiaN number and differs from the index on multi-GPU boards.
    for position, node in enumerate(root.findall("gpu")):
        reasons = node.find("clocks_event_reasons")
        if reasons is None:
            reasons = node.find("clocks_throttle_reasons")
        flags = {}
        if reasons is not None:
            for child in reasons:
                # clocks_event_reason_hw_slowdown / clocks_throttle_reason_hw_slowdown
                flags[child.tag.split("_reason_", 1)[-1]] = child.text
        power_w = _first_watts(node.findtext(path) for path in _XML_POWER_PATHS)
        gpus.append(_gpu(position, node.findtext, _XML_KEYS, driver, power_w, flags))
    return gpus


def _gpu(
    position: int,
    read: Callable[[str], str | None],
    keys: dict[str, str],
    driver: str | None,
    power_w: float | None,
    flags: dict[str, str | None],
) -> GPU:
    """A GPU from one of the full reports (``-q -x`` or ``-q``): `keys` names where each reading
    is in that report, `read` looks one up."""
    return GPU(
        index=position,
        name=clean(read(keys["name"])),
        vendor="nvidia",
        uuid=clean(read(keys["uuid"])),
        vram_total_mb=to_mib(read(keys["vram_total"])),
        vram_free_mb=to_mib(read(keys["vram_free"])),
        driver_version=driver,
        utilization_pct=to_int(read(keys["utilization"])),
        temperature_c=to_int(read(keys["temperature"])),
        power_w=power_w,
        source=SOURCE,
        throttled=throttled_from_flags(flags),
    )


# --- -q text -----------------------------------------------------------------------------------

_TEXT_KEYS = {
    "name": "product name",
    "uuid": "gpu uuid",
    "vram_total": "fb memory usage/total",
    "vram_free": "fb memory usage/free",
    "utilization": "utilization/gpu",
    "temperature": "temperature/gpu current temp",
}
_KEY_VALUE = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
_TEXT_POWER_KEYS = tuple(
    f"{section}/{reading}"
    for section in ("gpu power readings", "power readings")
    for reading in ("power draw", "average power draw", "instantaneous power draw")
)
_TEXT_REASONS = {
    "hw_slowdown": "hw slowdown",
    "hw_thermal_slowdown": "hw thermal slowdown",
    "sw_thermal_slowdown": "sw thermal slowdown",
    "hw_power_brake_slowdown": "hw power brake slowdown",
}


def parse_query_text(text: str) -> list[GPU]:
    """Parse ``nvidia-smi -q`` (indented ``Key : value`` text, one ``GPU <bus id>`` block each)."""
    header, blocks = _q_text_blocks(_unix_lines(text))
    driver = clean(header.get("driver version"))
    gpus = []
    for position, block in enumerate(blocks):
        reasons_section = (
            "clocks event reasons"
            if any(key.startswith("clocks event reasons/") for key in block)
            else "clocks throttle reasons"
        )
        flags = {
            reason: block.get(f"{reasons_section}/{label}")
            for reason, label in _TEXT_REASONS.items()
        }
        power_w = _first_watts(block.get(key) for key in _TEXT_POWER_KEYS)
        gpus.append(_gpu(position, block.get, _TEXT_KEYS, driver, power_w, flags))
    return gpus


def _q_text_blocks(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Flatten ``-q`` text into ``section/key`` → value maps: the header, then one per GPU."""
    header: dict[str, str] = {}
    blocks: list[dict[str, str]] = []
    sections: list[tuple[int, str]] = []
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("="):
            continue
        indent = len(line) - len(line.lstrip())
        match = _KEY_VALUE.match(line)
        if match is None:
            if indent == 0 and line.startswith("GPU "):
                blocks.append({})
                sections = []
                continue
            sections = [(level, name) for level, name in sections if level < indent]
            sections.append((indent, line.strip().lower()))
            continue
        sections = [(level, name) for level, name in sections if level < indent]
        key = "/".join([name for _, name in sections] + [match.group(2).strip().lower()])
        target = blocks[-1] if blocks and indent > 0 else header
        # The first occurrence wins: later sections (MIG devices, processes) reuse key names.
        target.setdefault(key, match.group(3).strip())
    return header, blocks


# --- default table and -L ----------------------------------------------------------------------

_TABLE_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)")
_TABLE_NAME_CELL = re.compile(r"^\s*(\d+)\s+(.*?)\s+(\S+)\s*$")
_TABLE_MEMORY_CELL = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TABLE_TEMPERATURE = re.compile(r"(\d+)C\b")
_TABLE_POWER = re.compile(r"(\d+(?:\.\d+)?)W\s*/")
_TABLE_UTILIZATION = re.compile(r"^\s*(\d+)%")
_LIST_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)\s]+)\)\s*$")


def parse_table(text: str) -> list[GPU]:
    """Parse the default ``nvidia-smi`` table (names may be cut short with "...").

    Free VRAM stays unknown: used + free is less than total by a reserve the table does not show.
    """
    lines = _unix_lines(text).split("\n")
    driver_match = _TABLE_DRIVER.search(text)
    driver = driver_match.group(1) if driver_match else None
    gpus = []
    for first, second in _table_gpu_rows(lines):
        name_cell = _TABLE_NAME_CELL.match(first[0])
        if name_cell is None:
            continue
        memory = _TABLE_MEMORY_CELL.search(second[1]) if len(second) > 1 else None
        temperature = _TABLE_TEMPERATURE.search(second[0])
        power = _TABLE_POWER.search(second[0])
        utilization = _TABLE_UTILIZATION.match(second[2]) if len(second) > 2 else None
        gpus.append(
            GPU(
                index=int(name_cell.group(1)),
                name=name_cell.group(2).strip() or None,
                vendor="nvidia",
                vram_total_mb=int(memory.group(2)) if memory else None,
                driver_version=driver,
                utilization_pct=int(utilization.group(1)) if utilization else None,
                temperature_c=int(temperature.group(1)) if temperature else None,
                power_w=float(power.group(1)) if power else None,
                source=SOURCE,
            )
        )
    return gpus


def _table_gpu_rows(lines: list[str]) -> Iterable[tuple[list[str], list[str]]]:
    """The first two rows (as cells) of each GPU box in the table's first section."""
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("|="))
    except StopIteration:
        return
    box: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            box.append(line.strip().strip("|").split("|"))
            continue
        if len(box) >= 2:
            yield box[0], box[1]
        box = []
        if not line.startswith("+"):
            return


def parse_list(text: str) -> list[GPU]:
    """Parse ``nvidia-smi -L``: index, full name and UUID. MIG instance lines are skipped."""
    gpus = []
    for line in _unix_lines(text).split("\n"):
        match = _LIST_LINE.match(line)
        if match:
            gpus.append(
                GPU(
                    index=int(match.group(1)),
                    name=match.group(2).strip(),
                    vendor="nvidia",
                    uuid=match.group(3),
                    source=SOURCE,
                )
            )
    return gpus


def merge_table_and_list(table: list[GPU], listed: list[GPU]) -> list[GPU]:
    """The table's figures with ``-L``'s full names and UUIDs, matched by index."""
    by_index = {gpu.index: gpu for gpu in listed}
    merged = []
    for gpu in table:
        named = by_index.pop(gpu.index, None)
        merged.append(replace(gpu, name=named.name, uuid=named.uuid) if named else gpu)
    # A GPU -L lists but the table could not show (cut output) still exists.
    merged.extend(by_index.values())
    return sorted(merged, key=lambda gpu: gpu.index if gpu.index is not None else -1)


# --- helpers -----------------------------------------------------------------------------------


def _unix_lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _index(value: object, position: int) -> int:
    index = to_int(value)
    return index if index is not None else position


def _watts(value: object) -> float | None:
    watts = to_float(value)
    return round(watts, 2) if watts is not None else None


def _first_watts(values: Iterable[object]) -> float | None:
    for value in values:
        watts = _watts(value)
        if watts is not None:
            return watts
    return None
