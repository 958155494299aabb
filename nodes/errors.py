from core.errors import ConflictError, DomainError


class NodeLimitReached(DomainError):
    code = "node_limit"
    http_status = 409


class NodeRetired(ConflictError):
    code = "node_retired"


class NodeStateConflict(ConflictError):
    code = "state_conflict"
