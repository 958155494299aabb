"""Application errors. Every app raises subclasses of DomainError; core.api.exceptions maps them
to HTTP by their `code` and `http_status`, so services never speak HTTP and views stay thin."""


class DomainError(Exception):
    # A plain DomainError is a request the service refuses as invalid: the same code as a
    # serializer's field errors (docs/api.md, the error table). Subclasses name their own.
    code = "invalid"
    http_status = 400

    def __init__(self, detail: str, *, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.fields = fields or {}


class ConflictError(DomainError):
    """A concurrent writer got there first (stream version, state, idempotency key)."""

    code = "conflict"
    http_status = 409
