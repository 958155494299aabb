"""Parsers for ``rocm-smi`` output (AMD GPUs): JSON, CSV and the ``--showproductname`` text.

All three carry the same per-card fields, keyed ``card0``, ``card1``…, so each format is read
into ``{card: {field: value}}`` and one function turns a card's fields into a GPU. Field names
changed case between releases (``Card series`` in ROCm ≤ 6.0, ``Card Series`` from 6.1), so
fields are matched case-insensitively.

``Card series`` is sometimes only the PCI device id (``0x744c``): that is not a product name, so
the name is then null. AMD GPUs have no CUDA compute capability: it is always null.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from typing import TypeVar

from agent.detect.model import GPU
from agent.detect.values import clean, to_bytes_mib, to_float, to_int

SOURCE = "rocm-smi"

# The product, VRAM, use, temperature, power, id and driver in one call.
QUERY_ARGS: tuple[str, ...] = (
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showuse",
    "--showtemp",
    "--showpower",
    "--showuniqueid",
    "--showdriverversion",
)

_CARD = re.compile(r"^card(\d+)$", re.IGNORECASE)
_TEXT_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.+?):\s*(.*?)\s*$")
_HEX_ID = re.compile(r"^0x[0-9a-f]+$", re.IGNORECASE)
_POWER_FIELDS = (
    "average graphics package power (w)",
    "current socket graphics package power (w)",
)
_TEMPERATURE_FIELDS = (
    "temperature (sensor edge) (c)",
    "temperature (sensor junction) (c)",
)

Cards = dict[int, dict[str, str]]
T = TypeVar("T")


def parse_json(text: str) -> list[GPU]:
    """Parse ``rocm-smi … --json``: ``{"card0": {...}, "system": {"Driver version": ...}}``.

    Some releases print warnings before the JSON; reading starts at the first brace.
    """
    start = text.find("{")
    document = json.loads(text[start:] if start >= 0 else text)
    cards: Cards = {}
    driver = None
    for key, fields in document.items():
        if not isinstance(fields, dict):
            continue
        lowered = {str(name).lower(): str(value) for name, value in fields.items()}
        match = _CARD.match(key)
        if match:
            cards[int(match.group(1))] = lowered
        elif key.lower() == "system":
            driver = clean(lowered.get("driver version"))
    return _gpus(cards, driver)


def parse_csv(text: str) -> list[GPU]:
    """Parse ``rocm-smi … --csv``: a ``device,<field>,…`` header, one ``cardN`` row each."""
    rows = [row for row in csv.reader(io.StringIO(text.strip())) if row]
    if not rows:
        return []
    header = [name.strip().lower() for name in rows[0]]
    cards: Cards = {}
    for row in rows[1:]:
        match = _CARD.match(row[0].strip())
        if match and len(row) == len(header):
            cards[int(match.group(1))] = dict(zip(header, row, strict=True))
    return _gpus(cards, driver=None)


def parse_text(text: str) -> list[GPU]:
    """Parse the plain report (``GPU[0]\\t\\t: Card series: \\t\\t0x744c``)."""
    cards: Cards = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        match = _TEXT_LINE.match(line.strip())
        if match:
            card = cards.setdefault(int(match.group(1)), {})
            card[match.group(2).strip().lower()] = match.group(3)
    return _gpus(cards, driver=None)


def _gpus(cards: Cards, driver: str | None) -> list[GPU]:
    return [_gpu(index, fields, driver) for index, fields in sorted(cards.items())]


def _gpu(index: int, fields: dict[str, str], driver: str | None) -> GPU:
    total = to_bytes_mib(fields.get("vram total memory (b)"))
    used = to_bytes_mib(fields.get("vram total used memory (b)"))
    return GPU(
        index=index,
        name=_product_name(fields),
        vendor="amd",
        uuid=clean(fields.get("unique id")),
        vram_total_mb=total,
        vram_free_mb=total - used if total is not None and used is not None else None,
        driver_version=driver,
        utilization_pct=to_int(fields.get("gpu use (%)")),
        temperature_c=_first(to_int(fields.get(key)) for key in _TEMPERATURE_FIELDS),
        power_w=_first(to_float(fields.get(key)) for key in _POWER_FIELDS),
        source=SOURCE,
    )


def _first(values: Iterable[T | None]) -> T | None:
    return next((value for value in values if value is not None), None)


def _product_name(fields: dict[str, str]) -> str | None:
    for key in ("card series", "device name"):
        name = clean(fields.get(key))
        if name is not None and not _HEX_ID.match(name):
            return name
    return None
