"""The claim body, validated without DRF's serializers for the shape agents send.

Every claim carries `{"wait": seconds}`, and `ClaimIn` (DRF: a copy of its declared fields per
request, then the field's coercions and validators) is a cost every claim would pay for one
number (docs/benchmarks.md §1). This accepts only a plainly valid body, a JSON object whose
`wait`, if present, is a JSON number within ClaimIn's bounds, and gives what `ClaimIn` would;
anything else (a string DRF would coerce, anything out of range) returns None, and `ClaimIn`
decides, with its field-level message. `tests/jobs/test_claim_body.py` checks, over generated
bodies, that whatever this accepts `ClaimIn` accepts identically.
"""

import math
from typing import Any

from jobs.serializers import ClaimIn

# The rule is read from ClaimIn's own field, once, so the two cannot drift apart.
_WAIT = ClaimIn._declared_fields["wait"]


def claim_plain(data: Any) -> dict[str, float] | None:
    """`ClaimIn(data=data).validated_data` for a plainly valid body, else None."""
    if type(data) is not dict:
        return None
    wait = data.get("wait", _WAIT.default)
    if type(wait) not in (int, float):
        return None
    try:  # an integer too large for a float is ClaimIn's to refuse
        wait = float(wait)
    except OverflowError:
        return None
    if not math.isfinite(wait) or not _WAIT.min_value <= wait <= _WAIT.max_value:
        return None
    return {"wait": wait}
