from core.errors import ConflictError


class NotRedeliverable(ConflictError):
    code = "not_redeliverable"
