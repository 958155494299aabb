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

from rest_framework import serializers

from nodes.serializers import HeartbeatIn

# Every rule below is read from HeartbeatIn's own fields, once, so the two cannot drift apart.
_DECLARED = HeartbeatIn._declared_fields
_STATUSES = frozenset(_DECLARED["status"].choices)
_LEASES = _DECLARED["leases"]
_MAX_LEASES = _LEASES.max_length
_TOKEN = re.compile(rf"[A-Za-z0-9_\-]{{1,{_LEASES.child.max_length}}}")
_GPUS = _DECLARED["gpus"]
_MAX_GPUS = _GPUS.max_length
_KINDS = {
    serializers.BooleanField: bool,
    serializers.FloatField: float,
    serializers.IntegerField: int,
}


def _rules(serializer: serializers.Serializer) -> dict[str, tuple]:
    """name: (kind, minimum, maximum) for each field of LoadIn or GpuStateIn, all of them
    nullable, optional and None by default (what `_record` assumes)."""
    rules = {}
    for name, field in serializer._declared_fields.items():
        if not (field.allow_null and not field.required and field.default is None):
            raise TypeError(f"{type(serializer).__name__}.{name} is not an optional nullable")
        bounds = getattr(field, "min_value", None), getattr(field, "max_value", None)
        rules[name] = (_KINDS[type(field)], *bounds)
    return rules


_LOAD = _rules(_DECLARED["load"])
_GPU = _rules(_GPUS.child)


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
        if type(gpus) is not list or len(gpus) > _MAX_GPUS:
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
