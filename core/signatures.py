"""Signed HTTP bodies, as Stripe signs its webhooks: one rule for both directions.

Header value: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`, with one `v1`
per secret in force (two while a secret is being rotated). Signing the timestamp with the body
means an old delivery cannot be replayed with a new time; the receiver refuses a timestamp
outside its tolerance. Used for the payment provider's webhooks the hub receives
(ledger.funding) and for the completion webhooks it sends (webhooks.signing).
"""

import hashlib
import hmac
import time
from collections.abc import Sequence


def signature_hex(body: bytes, *, secret: str, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return mac.hexdigest()


def signature_header(body: bytes, *, secrets: Sequence[str], timestamp: int) -> str:
    signatures = ",".join(
        f"v1={signature_hex(body, secret=s, timestamp=timestamp)}" for s in secrets
    )
    return f"t={timestamp},{signatures}"


def signature_problem(
    body: bytes, header: str, *, secret: str, tolerance_s: int, now: float | None = None
) -> str | None:
    """Why `header` does not sign `body` with `secret` now, or None when it does."""
    timestamp: int | None = None
    given: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            try:
                timestamp = int(value)
            except ValueError:
                return "the signature header is malformed"
        elif name == "v1":
            given.append(value)
    if timestamp is None or not given:
        return "the signature header is malformed"
    current = time.time() if now is None else now
    # Compared, not subtracted: float minus a 400-digit int overflows; comparison is exact.
    if not timestamp - tolerance_s <= current <= timestamp + tolerance_s:
        return "the signature's timestamp is outside the tolerance (a replay?)"
    expected = signature_hex(body, secret=secret, timestamp=timestamp).encode()
    if not any(hmac.compare_digest(expected, g.encode()) for g in given):
        return "the signature does not match the body"
    return None
