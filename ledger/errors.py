"""Application errors. Every app raises subclasses of DomainError; the API maps them to HTTP."""


class DomainError(Exception):
    code = "error"
    http_status = 400

    def __init__(self, detail: str, *, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.fields = fields or {}


class ConflictError(DomainError):
    """A concurrent writer got there first (stream version, state, idempotency key)."""

    code = "conflict"
    http_status = 409


class VersionConflict(ConflictError):
    code = "version_conflict"


class IdempotencyConflict(ConflictError):
    code = "idempotency_conflict"


class InvalidEvent(DomainError):
    code = "invalid_event"
    http_status = 400


class UnbalancedEntry(DomainError):
    code = "unbalanced_entry"
    http_status = 400


class InsufficientFunds(DomainError):
    code = "insufficient_funds"
    http_status = 402


class ImmutableRecord(DomainError):
    code = "immutable"
    http_status = 409
