"""What can go wrong talking to a hub, as exceptions a caller can tell apart."""

from __future__ import annotations

from typing import Any


class ComputePoolError(Exception):
    """Every error this client raises."""


class HubError(ComputePoolError):
    """The hub refused the request: a 4xx with the API's error shape (`error`, `detail`,
    `fields`, docs/api.md). `code` is the API's error code, `fields` the field-level messages."""

    def __init__(
        self, status: int, code: str, detail: str, fields: dict[str, Any] | None = None
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.fields = fields or {}
        super().__init__(self.one_line())

    def one_line(self) -> str:
        problems = "; ".join(f"{name}: {message}" for name, message in _flat(self.fields))
        text = f"{self.status} {self.code}: {self.detail}"
        return f"{text} ({problems})" if problems else text


class HubUnavailable(ComputePoolError):
    """No usable answer: the connection failed or timed out, or the hub answered 5xx, after the
    client's retries."""


class ChecksumMismatch(ComputePoolError):
    """A downloaded file's sha256 is not the one the hub recorded; the file was not kept."""


class WaitTimeout(ComputePoolError):
    """The job did not end within the time the caller allowed."""


class JobFileError(ComputePoolError):
    """A job file (job.yaml) is unreadable or names something a job does not take."""


def _flat(fields: object, prefix: str = "") -> list[tuple[str, str]]:
    """DRF nests a serializer's errors (`{"requirements": {"ram_mb": ["…"]}}`): one
    `requirements.ram_mb` per message, in the order the hub gave them."""
    if isinstance(fields, dict):
        out: list[tuple[str, str]] = []
        for key, value in fields.items():
            out += _flat(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(fields, list):
        if all(isinstance(item, str) for item in fields):
            return [(prefix, " ".join(fields))]
        return [pair for item in fields for pair in _flat(item, prefix)]
    return [(prefix, str(fields))]
