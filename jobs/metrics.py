"""The jobs' figures for /metrics (docs/metrics.md): what happens to work, counted where it
happens, and the queue as it stands, read by one cached grouped query."""

from collections.abc import Iterable

from django.db import connection

from core.metrics import SECONDS_FAST, SECONDS_SLOW, cached, counter, histogram
from core.sql import statement
from jobs.models import TaskState
from jobs.size_class import size_class_name
from ledger.settlement import holds_outstanding

CLAIMS = counter(
    "computepool_claims_total",
    "Claims answered, by result: leased (a task was leased) or empty (nothing this node can run "
    "was free).",
    ["result"],
)
CLAIM_SECONDS = histogram(
    "computepool_claim_seconds",
    "How long one claim's statement took (its retries included, a long-poll's wait not).",
    SECONDS_FAST,
)
DISPATCH_SECONDS = histogram(
    "computepool_dispatch_seconds",
    "From a task becoming claimable (submitted, or its retry backoff over) to its lease.",
    SECONDS_SLOW,
)
ATTEMPTS = counter(
    "computepool_attempts_total",
    "Attempts ended, by what became of the task (succeeded, failed, requeued, cancelled) and "
    "the failure's class (job, infra, timeout; lease_expired or node_offline for a lost lease, "
    "handed_back for a lease its agent gave back; empty for a success).",
    ["outcome", "failure_class"],
)
JOBS_FINISHED = counter(
    "computepool_jobs_finished_total", "Jobs finished, by final state.", ["state"]
)
REAPED = histogram(
    "computepool_lease_reaper_batch_size",
    "Leases one reaper batch took back, by reason (lease_expired: the lease reaper; "
    "node_offline: the leases of nodes that went offline).",
    (1, 5, 10, 50, 100, 250, 500, 1000, 5000),
    ["reason"],
)
REAP_SECONDS = histogram(
    "computepool_lease_reaper_seconds", "How long one lease reaper run took.", SECONDS_FAST
)

_LIVE_STATES = (TaskState.QUEUED, TaskState.LEASED, TaskState.RUNNING)


@cached
def _depth() -> list[tuple[str, int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(statement("jobs", "queue_depth"))
        return cursor.fetchall()


def queue_samples() -> Iterable[tuple[dict[str, str], float]]:
    rows = _depth()
    # Every live state appears, at 0 when empty, so a query over it never sees a gap.
    seen = {state for state, _, _ in rows}
    samples = [
        ({"state": state, "size_class": size_class_name(size_class)}, count)
        for state, size_class, count in rows
    ]
    samples += [
        ({"state": state, "size_class": ""}, 0) for state in _LIVE_STATES if state not in seen
    ]
    return samples


@cached
def _holds() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(statement("jobs", "live_jobs"))
        jobs = [row[0] for row in cursor.fetchall()]
    return holds_outstanding(jobs)


def holds_samples() -> Iterable[tuple[dict[str, str], float]]:
    return [({}, _holds()[0])]


def held_credits_samples() -> Iterable[tuple[dict[str, str], float]]:
    return [({}, _holds()[1])]
