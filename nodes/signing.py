"""The hub's Ed25519 signing key: agents refuse any task spec it did not sign.

The key comes from HUB_SIGNING_KEY (base64 of the raw 32-byte private key) or, when that is
unset, from VAR_DIR/hub_signing_key, created on first use with mode 0600. Signatures are over
the canonical JSON of the payload (ledger.canonical), exactly the bytes agent.spec verifies.
"""

import base64
import contextlib
import os
import stat
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ledger.canonical import canonical_json

KEY_FILE_NAME = "hub_signing_key"
_RAW_KEY_BYTES = 32


def key_file() -> Path:
    return Path(settings.VAR_DIR) / KEY_FILE_NAME


def _create_key_file(path: Path) -> None:
    """Write a new key so that no process ever reads a partial file or a group-readable one.

    The key is written 0600 to a temporary file, then linked into place: the link fails if
    another process (a second gunicorn worker starting at the same moment) got there first,
    and then both use that one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = os.urandom(_RAW_KEY_BYTES)
    fd, tmp = tempfile.mkstemp(prefix=".hub_signing_key-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64encode(raw) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


def _read_key_file(path: Path) -> bytes:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ImproperlyConfigured(
            f"{path} holds the hub's signing key but is readable by others "
            f"(mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}"
        )
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
    except ValueError:
        raise ImproperlyConfigured(f"{path} does not hold a base64 signing key") from None
    if len(raw) != _RAW_KEY_BYTES:
        raise ImproperlyConfigured(f"{path} must hold 32 bytes (base64), got {len(raw)}")
    return raw


@lru_cache(maxsize=1)
def _private_key() -> Ed25519PrivateKey:
    if settings.HUB_SIGNING_KEY:
        # Checked for base64 and length when settings were loaded.
        raw = base64.b64decode(settings.HUB_SIGNING_KEY)
    else:
        path = key_file()
        if not path.exists():
            _create_key_file(path)
        raw = _read_key_file(path)
    return Ed25519PrivateKey.from_private_bytes(raw)


def reset_cache() -> None:
    """Forget the loaded key (tests that change where it comes from)."""
    _private_key.cache_clear()


def hub_public_key_b64() -> str:
    raw = _private_key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def sign(payload: dict[str, Any]) -> str:
    """Standard base64 of the Ed25519 signature over the payload's canonical JSON."""
    return base64.b64encode(_private_key().sign(canonical_json(payload))).decode("ascii")
