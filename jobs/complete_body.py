"""The completion body, validated without DRF's serializers for the shape agents send.

Every task ends with a completion, and `CompleteIn` (DRF: a deep copy of its declared fields
per request, then each field's coercions and validators) was 8 % of the hub's samples under
load (docs/benchmarks.md §2). This accepts only plainly valid bodies, with JSON's own types
and no artifacts, and gives exactly what `CompleteIn` would; anything else (a value DRF would
coerce or trim, anything out of range, artifacts) returns None, and `CompleteIn` decides, with
its field-level messages. `tests/jobs/test_complete_body.py` checks, over generated bodies,
that whatever this accepts `CompleteIn` accepts identically.
"""

import math
import re
from typing import Any

from jobs.serializers import CompleteIn

# Every rule is read from CompleteIn's own fields, once, so the two cannot drift apart.
_FIELDS = CompleteIn._declared_fields
_TOKEN = re.compile(rf"[A-Za-z0-9_\-]{{1,{_FIELDS['lease_token'].max_length}}}")
_EXIT = _FIELDS["exit_code"]
_TAIL_MAX = min(_FIELDS["stdout_tail"].max_length, _FIELDS["stderr_tail"].max_length)
_RUNTIME_MIN = _FIELDS["reported_runtime_s"].min_value
# DRF's CharField refuses NUL and lone surrogates; such a tail goes to CompleteIn.
_PROHIBITED = re.compile("[\x00\ud800-\udfff]")


class _Unplain(Exception):
    """Not a body this module decides: `CompleteIn` will."""


def _tail(data: dict, name: str) -> str:
    value = data.get(name, "")
    if type(value) is not str or len(value) > _TAIL_MAX or _PROHIBITED.search(value):
        raise _Unplain
    return value


def complete_plain(data: Any) -> dict[str, Any] | None:
    """`CompleteIn(data=data).validated_data` for a plainly valid body, else None."""
    try:
        if type(data) is not dict:
            raise _Unplain
        token = data.get("lease_token")
        if type(token) is not str or not _TOKEN.fullmatch(token):
            raise _Unplain
        exit_code = data.get("exit_code", 0)
        if type(exit_code) is not int or not _EXIT.min_value <= exit_code <= _EXIT.max_value:
            raise _Unplain
        if data.get("artifacts", []) != [] or type(data.get("artifacts", [])) is not list:
            raise _Unplain
        runtime = data.get("reported_runtime_s")
        if runtime is not None:
            if type(runtime) not in (int, float):
                raise _Unplain
            try:  # an integer too large for a float is CompleteIn's to refuse
                runtime = float(runtime)
            except OverflowError:
                raise _Unplain from None
            if not math.isfinite(runtime) or runtime < _RUNTIME_MIN:
                raise _Unplain
        want_next = data.get("want_next", False)
        if type(want_next) is not bool:
            raise _Unplain
        return {
            "lease_token": token,
            "exit_code": exit_code,
            "stdout_tail": _tail(data, "stdout_tail"),
            "stderr_tail": _tail(data, "stderr_tail"),
            "artifacts": [],
            "reported_runtime_s": runtime,
            "want_next": want_next,
        }
    except _Unplain:
        return None
