"""Event types of jobs, tasks and attempts. Task and attempt events go on the task's stream."""

from ledger.registry import (
    INT,
    NON_NEGATIVE_INT,
    NULLABLE_INT,
    NULLABLE_STR,
    POSITIVE_INT,
    STR,
    register,
)

TASK_REF = {"task_id": INT, "job_id": INT, "index": NON_NEGATIVE_INT}

register(
    "JobSubmitted",
    properties={
        "job_id": INT,
        "submitter_id": INT,
        "kind": STR,
        "slices": INT,
        "priority": INT,
        "timeout_s": INT,
        "max_attempts": INT,
        "price_ceiling": INT,
        "max_cost": INT,
        "requirements": {"type": "object"},
        "replicas": INT,
        "quorum": INT,
        "retention_days": POSITIVE_INT,
    },
    # A job submitted before verification existed states no replicas: one each; one before
    # retention, no retention_days.
    required=[
        "job_id",
        "submitter_id",
        "kind",
        "slices",
        "priority",
        "timeout_s",
        "max_attempts",
        "price_ceiling",
        "max_cost",
        "requirements",
    ],
)
register("JobStarted", properties={"job_id": INT})
register(
    "JobFinished",
    properties={"job_id": INT, "state": STR, "succeeded": INT, "failed": INT, "cancelled": INT},
)
register("JobCancelRequested", properties={"job_id": INT, "by": STR})
register(
    "ArtifactsExpired",
    properties={
        "job_id": INT,
        "retention_days": POSITIVE_INT,
        "artifacts": POSITIVE_INT,
        "bytes": NON_NEGATIVE_INT,
    },
    description="The job's retention ran out: its stored outputs were deleted (jobs.retention). "
    "Their names, sizes and checksums stay on the job.",
)
register(
    "TaskClaimed",
    properties={
        **TASK_REF,
        "attempt_id": INT,
        "attempt": INT,
        "node_id": INT,
        "lease_expires_at": STR,
        "price_per_s": INT,
    },
)
register("TaskStarted", properties={**TASK_REF, "attempt_id": INT})
register(
    "AttemptSucceeded",
    properties={
        **TASK_REF,
        "attempt_id": INT,
        "node_id": INT,
        "runtime_ms": INT,
        "exit_code": INT,
        "artifacts": {"type": "array"},
    },
)
register(
    "AttemptFailed",
    properties={
        **TASK_REF,
        "attempt_id": INT,
        "node_id": INT,
        "runtime_ms": INT,
        "failure_class": STR,
        "exit_code": NULLABLE_INT,
        "detail": STR,
        "outcome": {"enum": ["requeued", "failed", "cancelled"]},
        # Why, in one word, where the agent says ("thermal": it stopped the work to cool down).
        "reason": STR,
    },
    required=[*TASK_REF, "attempt_id", "node_id", "runtime_ms", "failure_class", "exit_code",
              "detail", "outcome"],
)  # fmt: skip
register(
    "AttemptLost",
    properties={
        **TASK_REF,
        "attempt_id": INT,
        "node_id": INT,
        "reason": STR,
        "outcome": {"enum": ["requeued", "failed", "cancelled"]},
    },
)
register(
    "AttemptHandedBack",
    properties={
        **TASK_REF,
        "attempt_id": INT,
        "node_id": INT,
        "reason": STR,
        "outcome": {"enum": ["requeued", "cancelled"]},
    },
    description="The node gave the attempt back unfinished (its owner wants the machine): "
    "requeued at once without using up an attempt, or cancelled with its job.",
)
register(
    "TaskCancelled", properties={**TASK_REF, "attempt_id": NULLABLE_INT, "reason": NULLABLE_STR}
)

# Verification (jobs.verification): on the job's stream.
register(
    "ReplicaAdded",
    properties={
        **TASK_REF,
        "replica": INT,
        "reason": {"enum": ["requested", "spot_check"]},
        "why": STR,
    },
    description="A replica of a slice was added: a spot-check, or one more to break a tie.",
)
register(
    "SliceVerified",
    properties={
        "job_id": INT,
        "index": NON_NEGATIVE_INT,
        "reason": {"enum": ["requested", "spot_check"]},
        "outcome": {"enum": ["agreed", "no_quorum", "cancelled"]},
        "quorum": INT,
        "result": {"type": ["object", "null"]},
        "agreed": {"type": "array", "items": INT},
        "rejected": {"type": "array", "items": INT},
        "undecided": {"type": "array", "items": INT},
        "detail": STR,
    },
    description="A verified slice's verdict: the result a quorum of operators agreed on, the "
    "attempts that agreed (paid) and those that did not (rejected: not paid).",
)
