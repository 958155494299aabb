"""The ledger's sealing key: each seal batch's head is signed, so a chain recomputed by someone
who can write the database but does not hold the key no longer verifies.

The key is LEDGER_SIGNING_KEY (or VAR_DIR/ledger_signing_key, core.keys), a key of its own
rather than the hub's task-spec key (docs/decisions.md). A batch records which key signed it
(the fingerprint of its public key); verification trusts the current key and the retired keys
in LEDGER_VERIFY_KEYS, so batches signed before a rotation still verify after it.
"""

import base64
import binascii
from dataclasses import asdict, dataclass, fields
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from core import keys
from ledger.canonical import canonical_json

KEY_FILE_NAME = "ledger_signing_key"
# Signed bytes start with this line, which no canonical JSON does: a seal's signature can never
# pass for a signature over anything else.
_DOMAIN = b"computepool ledger seal v1\n"


@dataclass(frozen=True)
class SignedHead:
    """What a seal batch's signature says: the chain from seal #1 to seal #last_seq hashes to
    head_hash (this batch sealed #first_seq on, `count` events, everything below horizon_txid).
    head_hash commits to every seal before it, so one valid signature covers all of them."""

    first_seq: int
    last_seq: int
    count: int
    horizon_txid: int
    head_hash: str
    key_id: str

    def message(self) -> bytes:
        return _DOMAIN + canonical_json(asdict(self))


# The fields of a SignedHead, which a seal batch has under the same names.
SIGNED_FIELDS = tuple(field.name for field in fields(SignedHead))


def _private_key() -> Ed25519PrivateKey:
    return keys.loaded("LEDGER_SIGNING_KEY", KEY_FILE_NAME)


reset_cache = keys.forget


def key_id() -> str:
    return keys.fingerprint(_private_key())


def public_key_b64() -> str:
    return keys.public_b64(_private_key())


def head_sign(head: SignedHead) -> str:
    """Standard base64 of the current key's signature of `head` (whose key_id must be its)."""
    if head.key_id != key_id():
        raise ValueError(f"a head naming key {head.key_id} cannot be signed with {key_id()}")
    return base64.b64encode(_private_key().sign(head.message())).decode("ascii")


def trusted_keys() -> dict[str, Ed25519PublicKey]:
    """Every key whose seal signatures verify, by key id: the current one and the retired."""
    public = [keys.public_key(b64) for b64 in settings.LEDGER_VERIFY_KEYS]
    public.append(_private_key().public_key())
    return {keys.fingerprint(key): key for key in public}


def signature_problem(
    head: SignedHead, signature: str, trusted: dict[str, Ed25519PublicKey] | None = None
) -> str | None:
    """Why `signature` is not a trusted key's signature of `head`, in words; None when it is."""
    key = (trusted if trusted is not None else trusted_keys()).get(head.key_id)
    if key is None:
        return (
            f"is signed by key {head.key_id or '(none)'}, which is neither LEDGER_SIGNING_KEY "
            "nor in LEDGER_VERIFY_KEYS"
        )
    try:
        key.verify(base64.b64decode(signature, validate=True), head.message())
    except (InvalidSignature, binascii.Error, ValueError):
        return f"does not carry key {head.key_id}'s signature of its head"
    return None


def head_as_json(head: SignedHead, signature: str, **extra: Any) -> dict[str, Any]:
    return {**asdict(head), "signature": signature, **extra}


def head_from_json(data: dict[str, Any]) -> tuple[SignedHead, str]:
    """A head written by `head_as_json`: (the head, its signature). KeyError/TypeError when a
    field is missing or of the wrong kind."""
    head = SignedHead(**{name: data[name] for name in SIGNED_FIELDS})
    for field in fields(SignedHead):
        if type(getattr(head, field.name)) is not field.type:
            raise TypeError(f"{field.name} must be {field.type.__name__}")
    if type(data["signature"]) is not str:
        raise TypeError("signature must be a string")
    return head, data["signature"]
