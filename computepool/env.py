"""Typed readers for environment variables that fail loudly, naming the variable.

A typo in a deployment's environment must stop start-up with a message, not fall back to a
default that silently does something else.
"""

import base64
import binascii
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = os.environ.get(name)
    if value is None or value == "":
        if required:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use one of 1/0, true/false)")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip()
    if value.upper() in choices:
        return value.upper()
    if value in choices:
        return value
    raise ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(choices)}")


def _ed25519_bytes(name: str, value: str) -> bytes:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ImproperlyConfigured(f"{name} is not valid base64") from None
    if len(raw) != 32:
        raise ImproperlyConfigured(
            f"{name} must be 32 bytes (base64 of a raw Ed25519 key), got {len(raw)}"
        )
    return raw


def env_ed25519(name: str) -> str | None:
    """An Ed25519 key as base64 of its raw 32 bytes (unset: None)."""
    value = env_str(name, None)
    if value is not None:
        _ed25519_bytes(name, value)
    return value


def env_ed25519_list(name: str) -> list[str]:
    """Comma-separated Ed25519 keys, each base64 of its raw 32 bytes."""
    values = env_list(name, [])
    for value in values:
        _ed25519_bytes(name, value)
    return values


_RATE_PERIODS = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def env_rate(name: str, default: str) -> tuple[int, int]:
    """A budget written as "<count>/<period>" (period: s, min, hour or day, as DRF writes
    throttle rates): returns (count, seconds)."""
    raw = os.environ.get(name) or default
    count, _, period = raw.strip().partition("/")
    seconds = _RATE_PERIODS.get(period.strip().lower())
    if not count.strip().isdigit() or int(count) < 1 or seconds is None:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a rate: write <count>/<period>, e.g. 10/min "
            "(periods: s, min, hour, day)"
        )
    return int(count), seconds
