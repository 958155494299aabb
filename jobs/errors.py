from core.errors import ConflictError, DomainError


class StaleLease(ConflictError):
    """The token is not the current lease of that attempt: changes nothing, pays nothing."""

    code = "stale_lease"


class JobNotCancellable(ConflictError):
    code = "not_cancellable"


class ArtifactRejected(DomainError):
    code = "artifact_rejected"
    http_status = 400


class ArtifactTooLarge(DomainError):
    code = "artifact_too_large"
    http_status = 413


class ArtifactExpired(DomainError):
    """The job's retention ran out and its stored outputs were deleted (jobs.retention)."""

    code = "artifact_expired"
    http_status = 410
