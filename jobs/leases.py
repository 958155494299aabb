"""Leases over time: heartbeats extend them, the reaper takes back the expired ones.

The reaper and the offline hook share one path: lock the lost attempts (`FOR UPDATE SKIP
LOCKED`: an attempt that a completion is recording right now is left to it), mark them lost,
and return each task to the queue with a backoff, excluding the node that lost it — or fail it
when its attempts are spent. Idempotent: a second run finds nothing to do.
"""

import logging
import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.expressions import RawSQL
from django.utils import timezone

from core.alerts import alert
from core.sql import statement
from jobs import billing, metrics, verification
from jobs.attempts import backoff_until, count_attempt, exclude_node, job_count_finished
from jobs.claim import lease_duration
from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, AttemptState, Task, TaskState
from jobs.wakeup import notify_work
from ledger.services import event_append
from nodes.models import Node, NodeState

REAP_BATCH = 500
logger = logging.getLogger(__name__)


def leases_extend(node: Any, tokens: list[str]) -> dict[str, Any]:
    """Heartbeat hook: extend the node's current leases; tell it which to drop or cancel."""
    if not tokens:
        return {}
    now = timezone.now()
    expires = now + lease_duration()
    names = {
        "expires": expires,
        "node": node.pk,
        "tokens": tokens,
        "states": list(ACTIVE_ATTEMPT_STATES),
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(statement("jobs", "leases_extend"), names)
        live = cursor.fetchall()
    leases = {token: expires.isoformat() for token, _ in live}
    cancel = [token for token, stop in live if stop]
    cancel += [token for token in tokens if token not in leases]
    return {"leases": leases, "cancel": cancel}


def leases_reap(*, now: datetime | None = None) -> int:
    """Return expired leases to the queue (beat, every few seconds). Returns how many."""
    now = now or timezone.now()
    started = time.perf_counter()
    total = 0
    while True:
        with transaction.atomic():
            lost = list(
                Attempt.objects.select_for_update(skip_locked=True)
                .filter(state__in=ACTIVE_ATTEMPT_STATES, lease_expires_at__lte=now)
                .order_by("lease_expires_at")
                .values_list("id", flat=True)[:REAP_BATCH]
            )
            blamed = _lose(lost, reason="lease_expired", now=now)
        _blame(blamed, now)
        total += len(lost)
        if len(lost) < REAP_BATCH:
            # Any slice whose verdict an ended replica left undecided (a crash between a commit
            # and its decision after it): idempotent, and nothing to read when none is open.
            verification.verifications_decide_due()
            metrics.REAP_SECONDS.observe(time.perf_counter() - started)
            if total >= settings.ALERT_LEASES_LOST_AT:
                alert(
                    "leases_lost",
                    f"{total} leases lost at once",
                    f"The lease reaper took back {total} expired leases in one run at "
                    f"{now.isoformat()} (the alert threshold is "
                    f"{settings.ALERT_LEASES_LOST_AT}, ALERT_LEASES_LOST_AT). Many nodes "
                    "stopped heartbeating together: a network or hub outage, or a bad agent "
                    "release.",
                )
            return total


def leases_reclaim_offline(node_ids: list[int]) -> None:
    """Offline hook: the nodes left service; every lease they held goes back to the queue.

    Runs inside the transaction that moved them (one of the reaper's batches)."""
    # One array parameter rather than one per node: a reaper's batch has thousands.
    nodes = RawSQL("SELECT unnest(%s::bigint[])", (list(node_ids),))
    lost = list(
        Attempt.objects.select_for_update(skip_locked=True)
        .filter(state__in=ACTIVE_ATTEMPT_STATES, node_id__in=nodes)
        .values_list("id", flat=True)
    )
    now = timezone.now()
    blamed = _lose(lost, reason="node_offline", now=now)
    if blamed:
        transaction.on_commit(partial(_blame, blamed, now))


def _blame(lost: list[tuple[int, datetime]], now: datetime) -> None:
    """Count lost attempts against their nodes, after the losing transaction committed (as a
    completion does): the node's row lock, and a quarantine it may set off, are then taken on
    their own rather than behind the batch's locks, which the node reaper (holding thousands
    of node rows while it reclaims their leases) would otherwise wait on in the other order.

    Only what the node is to blame for: a lease lapses when its heartbeats stop reaching the
    hub, and that is the hub's doing while it cannot record heartbeats (its database down, its
    web processes restarting). So a loss counts only if the hub was hearing heartbeats when it
    was found (some node beat within its last interval and grace) and it was found on time
    (the lease ended within `_late()` of now): a reaper that runs late was itself down."""
    if not lost or not _hub_could_hear(now):
        return
    late = _late()
    for node_id, expires in lost:
        if now - expires <= late:
            try:
                billing.record_outcome(node_id=node_id, success=False)
            except Exception:  # one node's bookkeeping must not cost the others theirs
                logger.exception("could not count a lost lease against node %s", node_id)


def _hub_could_hear(now: datetime) -> bool:
    # A node is online with its degraded deadline ahead exactly when the hub recorded a beat
    # of it within the last interval and grace (one probe of the node_degraded_due index).
    return Node.objects.filter(state=NodeState.ONLINE, degraded_after__gt=now).exists()


def _late() -> timedelta:
    """How long after a lease ends its reaper can find it while both reapers run on schedule."""
    every = max(settings.JOB_REAPER_INTERVAL_S, settings.NODE_REAPER_INTERVAL_S)
    return timedelta(seconds=2 * every + settings.NODE_HEARTBEAT_GRACE_S)


def _lose(attempt_ids: list[int], *, reason: str, now: datetime) -> list[tuple[int, datetime]]:
    """Mark the (locked) attempts lost and settle each at zero. Returns each lost attempt's
    node and lease end, for the caller to blame once the transaction has committed
    (`_blame`).

    A lost attempt whose job's cancellation was requested ends its task as cancelled: requeued,
    the task of a cancelled job would run again on another node and be charged. The attempts
    are locked by the caller, so the flag read here is the last one committed, and a cancel
    that flags them afterwards finds them lost and ends the task in its own pass
    (jobs.cancellation)."""
    if not attempt_ids:
        return []
    metrics.REAPED.labels(reason).observe(len(attempt_ids))
    Attempt.objects.filter(pk__in=attempt_ids).update(state=AttemptState.LOST, finished_at=now)
    rows = list(
        Task.objects.filter(current_attempt_id__in=attempt_ids)
        # The tasks' rows only: the joined job rows come after the holds (lock order), and the
        # attempts are locked already.
        .select_for_update(of=("self",))
        .order_by("job_id", "id")
        .values_list(
            "id",
            "job_id",
            "index",
            "attempts",
            "max_attempts",
            "version",
            "current_attempt_id",
            "current_attempt__node_id",
            "current_attempt__lease_expires_at",
            "job__submitter_id",
            "current_attempt__cancel_requested",
            "job__cancel_requested_at",
            "replica",
        )
    )
    # The attempt's cancel flag, or its job's (an attempt no cancel could flag).
    stopped = {row[0] for row in rows if row[10] or row[11] is not None}
    # Every job's hold before the first settlement, then the accounts of the submitters whose
    # jobs a spent or cancelled task may end (released to); then job rows in job order (rows
    # sorted).
    billing.holds_lock(
        {row[1] for row in rows},
        releasing_to={row[9] for row in rows if row[3] >= row[4] or row[0] in stopped},
    )
    requeued = False
    blamed: list[tuple[int, datetime]] = []
    for row in rows:
        task_id, job_id, index, attempts, max_attempts, version, attempt_id, node_id, expires = row[
            :9
        ]
        cancelled, spent = task_id in stopped, attempts >= max_attempts
        outcome = "cancelled" if cancelled else "failed" if spent else "requeued"
        changes = {"current_attempt": None, "version": F("version") + 1}
        if cancelled:
            changes.update(state=TaskState.CANCELLED, finished_at=now)
        elif spent:
            changes.update(state=TaskState.FAILED, finished_at=now)
        else:
            changes.update(
                state=TaskState.QUEUED,
                available_at=backoff_until(attempts, now),
                excluded_nodes=exclude_node(node_id),
            )
        Task.objects.filter(pk=task_id).update(**changes)
        event_append(
            stream=f"task:{task_id}",
            type="AttemptLost",
            actor="system:reaper",
            expected_version=version,
            payload={
                "task_id": task_id,
                "job_id": job_id,
                "index": index,
                "attempt_id": attempt_id,
                "node_id": node_id,
                "reason": reason,
                "outcome": outcome,
            },
        )
        billing.settle(attempt_id=attempt_id, runtime_ms=0, charge=False)
        count_attempt(outcome, reason)
        blamed.append((node_id, expires))
        if outcome == "requeued":
            requeued = True
        else:
            if not (row[12] and outcome == "failed"):  # a replica counts with its slice's verdict
                job_count_finished(job_id, f"tasks_{outcome}", now)
            if row[12]:
                # Its slice's lock may not be taken here, behind the batch's holds: after commit.
                verification.decide_after_commit(job_id, index)
    if requeued:
        transaction.on_commit(notify_work)
    return blamed
