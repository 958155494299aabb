"""Reading one value out of tool text: placeholders, units, numbers.

Tools print "no value" in many spellings: ``[N/A]``, ``[Not Supported]``, ``[Function Not Found]``,
``[Requested functionality has been deprecated]``, ``N/A``, ``--``. All of them become ``None``.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_WITH_UNIT = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_PLACEHOLDERS = {"", "n/a", "na", "none", "unknown", "--", "not supported", "not available"}

# Sizes in MiB per unit. Tools say "MB" and "GB" for binary sizes (system_profiler's
# "16 GB" of VRAM is 16384 MiB), so the decimal spellings are read as binary too.
_MIB_PER_UNIT = {
    "b": 1 / 1048576,
    "kib": 1 / 1024,
    "kb": 1 / 1024,
    "mib": 1,
    "mb": 1,
    "gib": 1024,
    "gb": 1024,
    "tib": 1024 * 1024,
    "tb": 1024 * 1024,
}


def clean(value: object) -> str | None:
    """The text of a value, or None for any of the tools' "no value" placeholders."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        return None
    if text.lower() in _PLACEHOLDERS:
        return None
    return text


def to_float(value: object) -> float | None:
    """The first number in a value (``"26.20 W"`` → 26.2), or None."""
    text = clean(value)
    if text is None:
        return None
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def to_int(value: object) -> int | None:
    number = to_float(value)
    return round(number) if number is not None else None


def to_mib(value: object, *, default_unit: str = "mib") -> int | None:
    """A size as whole MiB: ``"16376 MiB"``, ``"16 GB"``, ``"34342961152"`` with unit "b"."""
    text = clean(value)
    if text is None:
        return None
    match = _WITH_UNIT.match(text)
    if not match:
        return None
    unit = (match.group(2) or default_unit).lower()
    factor = _MIB_PER_UNIT.get(unit)
    if factor is None:
        return None
    return int(float(match.group(1)) * factor)


def to_bytes_mib(value: object) -> int | None:
    """A byte count (rocm-smi, sysctl ``hw.memsize``) as whole MiB."""
    return to_mib(value, default_unit="b")


def squash_spaces(text: str | None) -> str | None:
    """Collapse runs of blanks (``"Xeon(R) CPU           X5680  @"``) into one space."""
    if text is None:
        return None
    squashed = " ".join(text.split())
    return squashed or None
