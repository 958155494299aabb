"""The ledger's errors, on the shared bases in core.errors."""

from core.errors import ConflictError, DomainError


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
