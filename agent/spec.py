"""Task specs are signed by the hub with Ed25519; the agent runs none whose signature fails.

Both sides sign and verify the same bytes: the spec as canonical JSON (sorted keys, no
whitespace, UTF-8). Keys and signatures travel as standard base64 of their raw bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64


class SpecRejected(Exception):
    """The spec is not what the hub signed, or cannot be checked at all."""


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _decode(value: str, *, what: str, size: int) -> bytes:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError) as exc:
        raise SpecRejected(f"{what} is not valid base64") from exc
    if len(raw) != size:
        raise SpecRejected(f"{what} must be {size} bytes, got {len(raw)}")
    return raw


def verify_spec(spec: dict[str, Any], signature_b64: str, public_key_b64: str) -> None:
    """Return quietly if `signature_b64` is the hub's signature over `spec`; else SpecRejected."""
    raw_key = _decode(public_key_b64, what="the hub's public key", size=PUBLIC_KEY_BYTES)
    try:
        key = Ed25519PublicKey.from_public_bytes(raw_key)
    except ValueError as exc:
        raise SpecRejected("the hub's public key is not an Ed25519 key") from exc
    signature = _decode(signature_b64, what="the signature", size=SIGNATURE_BYTES)
    try:
        message = canonical_json(spec)
    except (TypeError, ValueError) as exc:
        raise SpecRejected(f"the spec is not plain JSON: {exc}") from exc
    try:
        key.verify(signature, message)
    except InvalidSignature as exc:
        raise SpecRejected("the signature does not match the spec") from exc
