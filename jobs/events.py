"""Event types of jobs, tasks and attempts. Task and attempt events go on the task's stream."""

from ledger.registry import INT, NON_NEGATIVE_INT, NULLABLE_INT, NULLABLE_STR, STR, register

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
    },
)
register("JobStarted", properties={"job_id": INT})
register(
    "JobFinished",
    properties={"job_id": INT, "state": STR, "succeeded": INT, "failed": INT, "cancelled": INT},
)
register("JobCancelRequested", properties={"job_id": INT, "by": STR})
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
    },
)
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
    "TaskCancelled", properties={**TASK_REF, "attempt_id": NULLABLE_INT, "reason": NULLABLE_STR}
)
