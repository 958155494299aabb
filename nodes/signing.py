"""The hub's Ed25519 signing key: agents refuse any task spec it did not sign.

The key comes from HUB_SIGNING_KEY or, when that is unset, from VAR_DIR/hub_signing_key
(core.keys). Signatures are over the canonical JSON of the payload (ledger.canonical), exactly
the bytes agent.spec verifies.
"""

import base64
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from core import keys
from ledger.canonical import canonical_json

KEY_FILE_NAME = "hub_signing_key"


def _private_key() -> Ed25519PrivateKey:
    return keys.loaded("HUB_SIGNING_KEY", KEY_FILE_NAME)


reset_cache = keys.forget


def hub_public_key_b64() -> str:
    return keys.public_b64(_private_key())


def sign(payload: dict[str, Any]) -> str:
    """Standard base64 of the Ed25519 signature over the payload's canonical JSON."""
    return base64.b64encode(_private_key().sign(canonical_json(payload))).decode("ascii")
