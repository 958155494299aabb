"""The heartbeat body, validated without DRF's serializers for the shapes agents send.

Every node sends a heartbeat every few seconds, and `HeartbeatIn` (nested serializers: load,
GPUs, leases) cost more hub CPU than the rest of the request together: DRF deep-copies every
declared field of every nested serializer for each request (docs/benchmarks.md §5). This
accepts only plainly valid bodies, with JSON's own types (a string where a string is due, a
number for a number, no capabilities report), and gives exactly what `HeartbeatIn` would.
Anything else (a value DRF would coerce, anything out of range, any error) returns None, and
`HeartbeatIn` decides, with its field-level messages. `tests/nodes/test_heartbeat_body.py`
checks, over generated bodies, that whatever this accepts `HeartbeatIn` accepts identically.
"""

import math
import re
from typing import Any

from nodes.serializers import MAX_GPUS, MAX_MB

_STATUSES = frozenset(("available", "busy", "degraded", "draining"))
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{1,128}")
_MAX_LEASES = 256

# name: (kind, minimum, maximum), as in LoadIn and GpuStateIn (every field there is nullable,
# optional and defaults to None).
_LOAD = {
    "cpu_pct": (float, 0, 100_000),
    "mem_pct": (float, 0, 1000),
    "running": (int, 0, 10_000),
    "slots": (int, 0, 10_000),
}
_GPU = {
    "index": (int, 0, 255),
    "utilization_pct": (float, 0, 1000),
    "temperature_c": (float, -100, 1000),
    "power_w": (float, 0, 100_000),
    "vram_free_mb": (int, 0, MAX_MB),
    "throttled": (bool, None, None),
}


class _Unplain(Exception):
    """Not a body this module decides: `HeartbeatIn` will."""


def _value(value: Any, kind: type, low: float | None, high: float | None) -> Any:
    if value is None:
        return None
    if kind is bool:
        if type(value) is not bool:
            raise _Unplain
        return value
    if type(value) is int:
        number: int | float = value
    elif type(value) is float and kind is float and math.isfinite(value):
        number = value
    else:
        raise _Unplain
    if not low <= number <= high:
        raise _Unplain
    return float(number) if kind is float else number


def _record(data: Any, fields: dict[str, tuple]) -> dict[str, Any]:
    if type(data) is not dict:
        raise _Unplain
    return {name: _value(data.get(name), *rule) for name, rule in fields.items()}


def heartbeat_plain(data: Any) -> dict[str, Any] | None:
    """`HeartbeatIn(data=data).validated_data` for a plainly valid body, else None."""
    try:
        if type(data) is not dict or data.get("capabilities") is not None:
            raise _Unplain
        status = data.get("status")
        if type(status) is not str or status not in _STATUSES:
            raise _Unplain
        load = _record(data["load"], _LOAD) if "load" in data else {}
        gpus = data.get("gpus", [])
        if type(gpus) is not list or len(gpus) > MAX_GPUS:
            raise _Unplain
        leases = data.get("leases", [])
        if type(leases) is not list or len(leases) > _MAX_LEASES:
            raise _Unplain
        for token in leases:
            if type(token) is not str or not _TOKEN.fullmatch(token):
                raise _Unplain
        return {
            "status": status,
            "load": load,
            "gpus": [_record(gpu, _GPU) for gpu in gpus],
            "leases": list(leases),
            "capabilities": None,
        }
    except _Unplain:
        return None
