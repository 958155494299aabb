"""Ed25519 private keys the hub keeps outside the database: the task-spec key (nodes.signing)
and the ledger's sealing key (ledger.seal_signing).

A key comes from its setting (base64 of the raw 32-byte private key, checked when settings are
loaded) or, when that is unset, from a file under VAR_DIR created on first use with mode 0600.
"""

import base64
import contextlib
import hashlib
import os
import stat
import tempfile
from functools import cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

_RAW_KEY_BYTES = 32


def key_file(name: str) -> Path:
    return Path(settings.VAR_DIR) / name


def _create_key_file(path: Path) -> None:
    """Write a new key so that no process ever reads a partial file or a group-readable one.

    The key is written 0600 to a temporary file, then linked into place: the link fails if
    another process (a second gunicorn worker starting at the same moment) got there first,
    and then both use that one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = os.urandom(_RAW_KEY_BYTES)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
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
            f"{path} holds a signing key but is readable by others "
            f"(mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}"
        )
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
    except ValueError:
        raise ImproperlyConfigured(f"{path} does not hold a base64 signing key") from None
    if len(raw) != _RAW_KEY_BYTES:
        raise ImproperlyConfigured(f"{path} must hold 32 bytes (base64), got {len(raw)}")
    return raw


def private_key(configured: str | None, file_name: str) -> Ed25519PrivateKey:
    """The key in `configured` (a setting's value) or, when that is unset, in VAR_DIR/file_name."""
    if configured:
        raw = base64.b64decode(configured)
    else:
        path = key_file(file_name)
        if not path.exists():
            _create_key_file(path)
        raw = _read_key_file(path)
    return Ed25519PrivateKey.from_private_bytes(raw)


@cache
def loaded(setting: str, file_name: str) -> Ed25519PrivateKey:
    """The key of `setting` (or its file), read once per process."""
    return private_key(getattr(settings, setting), file_name)


def forget() -> None:
    """Forget every loaded key (tests that change where keys come from)."""
    loaded.cache_clear()


def public_raw(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def public_b64(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    return base64.b64encode(public_raw(key)).decode("ascii")


def fingerprint(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """A short name for a public key: the first 16 hex digits of its sha256."""
    return hashlib.sha256(public_raw(key)).hexdigest()[:16]


def public_key(b64: str) -> Ed25519PublicKey:
    """A public key from base64 of its raw 32 bytes (checked when settings are loaded)."""
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(b64))
