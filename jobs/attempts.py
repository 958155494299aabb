"""What an agent reports about an attempt: progress, logs, artifacts, completion, failure.

Every call presents the attempt's lease token. The transition is one compare-and-set UPDATE on
the attempt (`… WHERE id = ? AND lease_token = ? AND node_id = ? AND state IN (active) AND
lease_expires_at > now`): the one that changes a row wins; a stale, foreign or expired token
changes nothing and gets StaleLease (409), and so is never paid.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.files.base import File
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Func, Value
from django.db.models.functions import Least
from django.utils import timezone

from core.metrics import after_commit
from core.sql import statement
from jobs import billing, hooks, metrics, verification
from jobs.errors import ArtifactRejected, ArtifactTooLarge, StaleLease
from jobs.models import (
    ACTIVE_ATTEMPT_STATES,
    Artifact,
    Attempt,
    AttemptState,
    FailureClass,
    LogChunk,
    Task,
    TaskState,
)
from ledger.services import NewEvent, event_append, event_prepared, event_write_refused
from nodes.services import outcome_params

TAIL_CHARS = 64 * 1024


@dataclass(frozen=True)
class Fenced:
    """The attempt as it was read just before the compare-and-set, with what its settlement
    needs (so settling reads nothing of the job again)."""

    attempt_id: int
    task_id: int
    job_id: int
    index: int
    node_id: int
    task_version: int
    leased_at: datetime
    timeout_s: int
    state: str
    artifacts: int  # how many were uploaded
    figures: billing.SettleFigures
    replica: int  # 0: the slice's only task; else a replica of a verified slice
    trust: tuple[float, int]  # the node's reliability and verified results, when read

    def ended(self) -> verification.Ended:
        return verification.Ended(
            self.attempt_id, self.task_id, self.job_id, self.index, self.replica, self.node_id,
            self.figures.operator_id, *self.trust,
        )  # fmt: skip


def _read(attempt_id: int, token: str, node_id: int) -> Fenced:
    with connection.cursor() as cursor:
        cursor.execute(
            statement("jobs", "attempt_read"),
            {"attempt": attempt_id, "token": token, "node": node_id},
        )
        row = cursor.fetchone()
    if row is None:
        raise StaleLease("this lease token is not the current lease of that attempt")
    (task_id, job_id, index, version, leased_at, timeout_s, state, expires, submitter_id,
     operator_id, price, tier, region, kind, artifacts, replica, reliability,
     verified) = row  # fmt: skip
    if state not in ACTIVE_ATTEMPT_STATES or expires <= timezone.now():
        raise StaleLease(f"the lease has ended (attempt is {state})")
    figures = billing.SettleFigures(
        job_id, submitter_id, operator_id, price, timeout_s, leased_at, tier, region, kind, node_id
    )
    return Fenced(
        attempt_id, task_id, job_id, index, node_id, version, leased_at, timeout_s, state,
        artifacts, figures, replica, (reliability, verified),
    )  # fmt: skip


def _cas(fenced: Fenced, token: str, now: datetime | None = None, **changes: Any) -> None:
    """Move the attempt if, and only if, the lease is still current (at `now`)."""
    won = Attempt.objects.filter(
        pk=fenced.attempt_id,
        lease_token=token,
        state__in=ACTIVE_ATTEMPT_STATES,
        lease_expires_at__gt=now or timezone.now(),
    ).update(**changes)
    if not won:
        transaction.set_rollback(True)
        raise StaleLease("the lease ended while this report was being recorded")


def _task_event(fenced: Fenced, type: str, actor: str, **fields: Any) -> None:
    """Append to the task's stream at the version read before the compare-and-set."""
    event_append(**_task_event_args(fenced, type, actor, fields))


def _task_event_args(fenced: Fenced, type: str, actor: str, fields: dict) -> dict[str, Any]:
    return {
        "stream": f"task:{fenced.task_id}",
        "type": type,
        "actor": actor,
        "expected_version": fenced.task_version,
        "payload": {
            "task_id": fenced.task_id,
            "job_id": fenced.job_id,
            "index": fenced.index,
            "attempt_id": fenced.attempt_id,
            **fields,
        },
    }


def _succeed(
    fenced: Fenced, token: str, now: datetime, values: dict[str, Any], event_fields: dict
) -> None:
    """The node's reliability (its row first: docs/architecture.md, "Lock order"), then the
    attempt, its task and AttemptSucceeded at the task version read before the compare-and-set,
    in one statement (jobs/sql/succeed.sql): the reliability through the nodes app's function,
    the event through the ledger's door."""
    outcome = outcome_params(node_id=fenced.node_id, success=True, now=now)
    args = _task_event_args(fenced, "AttemptSucceeded", f"node:{fenced.node_id}", event_fields)
    event = NewEvent(**args)
    schema_version, payload = event_prepared(event.type, event.payload)
    params = {
        "attempt": fenced.attempt_id,
        "token": token,
        "leased": ACTIVE_ATTEMPT_STATES[0],
        "running": ACTIVE_ATTEMPT_STATES[1],
        "task_state": TaskState.SUCCEEDED,
        "task": fenced.task_id,
        "now": now,
        "stream": event.stream,
        "type": event.type,
        "schema_version": schema_version,
        "payload": payload,
        "actor": event.actor,
        "expected": event.expected_version,
    } | {f"rel_{name}": outcome[name] for name in ("node", "pa", "pb", "half")}
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement("jobs", "succeed"), params | values)
            won, moved, _ = cursor.fetchone()
    except IntegrityError as exc:
        event_write_refused(exc, [event])
    if not won:
        transaction.set_rollback(True)
        raise StaleLease("the lease ended while this report was being recorded")
    if not moved:  # the task had moved on from this attempt: never while the lease held
        transaction.set_rollback(True)
        raise StaleLease("the task no longer runs this attempt")


def _runtime_ms(fenced: Fenced, now: datetime) -> int:
    """Server-measured: from the lease's start to now, never more than the job's timeout."""
    elapsed = int((now - fenced.leased_at).total_seconds() * 1000)
    return max(0, min(elapsed, fenced.timeout_s * 1000))


def _tail(text: str) -> str:
    return (text or "")[-TAIL_CHARS:]


# --- progress and logs --------------------------------------------------------------------------


def attempt_progress(
    *, attempt_id: int, token: str, node_id: int, progress: int, message: str = ""
) -> None:
    fenced = _read(attempt_id, token, node_id)
    with transaction.atomic():
        if fenced.state == AttemptState.LEASED:
            _cas(fenced, token, state=AttemptState.RUNNING, progress=progress, message=message)
            Task.objects.filter(pk=fenced.task_id, current_attempt_id=attempt_id).update(
                state=TaskState.RUNNING, version=F("version") + 1
            )
            _task_event(fenced, "TaskStarted", f"node:{node_id}")
        else:
            _cas(fenced, token, progress=progress, message=message[:200])


def attempt_log(
    *, attempt_id: int, token: str, node_id: int, stream: str, seq: int, data: str
) -> bool:
    """Store one log chunk; a repeated (stream, seq) is accepted once. False if a duplicate."""
    fenced = _read(attempt_id, token, node_id)
    size = len(data.encode())
    with transaction.atomic():
        _cas(fenced, token, log_bytes=F("log_bytes") + size)
        used = Attempt.objects.values_list("log_bytes", flat=True).get(pk=attempt_id)
        if used > settings.JOB_MAX_LOG_BYTES:
            transaction.set_rollback(True)
            raise ArtifactTooLarge(
                f"this attempt's logs passed {settings.JOB_MAX_LOG_BYTES} bytes; keep the tail "
                "for completion"
            )
        try:
            with transaction.atomic():
                LogChunk.objects.create(attempt_id=attempt_id, stream=stream, seq=seq, data=data)
        except IntegrityError:
            Attempt.objects.filter(pk=attempt_id).update(log_bytes=F("log_bytes") - size)
            return False
    return True


def attempt_artifact(
    *, attempt_id: int, token: str, node_id: int, name: str, sha256: str, upload: File
) -> Artifact:
    """Store an output file after checking its size and that its sha256 is what was claimed."""
    fenced = _read(attempt_id, token, node_id)
    if upload.size > settings.JOB_MAX_ARTIFACT_BYTES:
        raise ArtifactTooLarge(f"artifacts are limited to {settings.JOB_MAX_ARTIFACT_BYTES} bytes")
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    if digest.hexdigest() != sha256.lower():
        raise ArtifactRejected(
            f"{name}: the upload's sha256 is {digest.hexdigest()}, not {sha256}",
            fields={"sha256": ["does not match the file"]},
        )
    upload.seek(0)
    with transaction.atomic():
        # Still our lease (a no-op write that takes the row lock): a stale agent uploads nothing.
        _cas(fenced, token, lease_expires_at=F("lease_expires_at"))
        if Artifact.objects.filter(attempt_id=attempt_id, name=name).exists():
            raise ArtifactRejected(
                f"{name} was already uploaded for this attempt",
                fields={"name": ["already uploaded"]},
            )
        artifact = Artifact(
            attempt_id=attempt_id, name=name, size=upload.size, sha256=sha256.lower()
        )
        artifact.attempt = Attempt.objects.select_related("task").get(pk=attempt_id)
        artifact.file.save(name, upload, save=False)
        artifact.save()
    return artifact


# --- completion and failure ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    task_state: str
    job_state: str | None  # set when this report finished the job
    runtime_ms: int
    charged: int  # credits minor units paid for this attempt (0 if not charged)


def attempt_complete(
    *,
    attempt_id: int,
    token: str,
    node_id: int,
    exit_code: int,
    stdout_tail: str = "",
    stderr_tail: str = "",
    artifacts: list[dict[str, Any]] | None = None,
    reported_runtime_s: float | None = None,
) -> Outcome:
    """The task succeeded: record it, settle the attempt once, finish the job if it was last."""
    fenced = _read(attempt_id, token, node_id)
    uploaded = (
        {a.name: a for a in Artifact.objects.filter(attempt_id=attempt_id).only("name", "sha256")}
        if fenced.artifacts
        else {}
    )
    for claimed in artifacts or []:
        stored = uploaded.get(claimed.get("name"))
        if stored is None or stored.sha256 != str(claimed.get("sha256", "")).lower():
            raise ArtifactRejected(
                f"artifact {claimed.get('name')!r} was not uploaded with that checksum",
                fields={"artifacts": ["each listed artifact must be uploaded first"]},
            )
    now = timezone.now()
    runtime = _runtime_ms(fenced, now)
    with transaction.atomic():
        # The node's reliability in the same commit, and its row first: the reapers and a
        # quarantine lock nodes before attempts and holds, so taking it after them could wait
        # on one of those while it waits on us (docs/architecture.md, "Lock order"). A stale
        # report rolls it back with the rest (`_succeed` takes it first).
        values = {
            "state": AttemptState.SUCCEEDED,
            "runtime_ms": runtime,
            "exit_code": exit_code,
            "stdout_tail": _tail(stdout_tail),
            "stderr_tail": _tail(stderr_tail),
            "reported_runtime_s": reported_runtime_s,
        }
        event_fields = {
            "node_id": node_id,
            "runtime_ms": runtime,
            "exit_code": exit_code,
            "artifacts": sorted(
                [{"name": a.name, "sha256": a.sha256} for a in uploaded.values()],
                key=lambda a: a["name"],
            ),
        }
        _succeed(fenced, token, now, values, event_fields)
        if verification.result_pending(fenced.ended(), now, spot_checkable=exit_code == 0):
            # Paid and counted by its slice's verdict, when every replica has ended.
            charged = 0
            job_state = verification.slice_decide(fenced.job_id, fenced.index, now)
        else:
            charged, job_state = _settle_and_count(fenced, attempt_id, runtime, now)
        count_attempt(TaskState.SUCCEEDED, "")
    return Outcome(TaskState.SUCCEEDED, job_state, runtime, charged)


def _settle_and_count(
    fenced: Fenced, attempt_id: int, runtime: int, now: datetime
) -> tuple[int, str | None]:
    """Pay a succeeded attempt and count it on its job, finishing the job if it was the last;
    returns what was charged and the state the job ended in (None if it goes on).

    The money moves last. The accounts a completion credits, the operator's earnings and (when
    the job ends) the submitter's available credits, are shared by every completion of that
    operator's nodes or that submitter's jobs, and each stays locked from its move until the
    commit: moved first, they would be held across the job's count, its end and its webhook, and
    the operator's other completions would queue behind all of it. So the job's hold is locked
    first (the lock order's place for it), with everything the settlement and the release read;
    then the job is counted and ended; then the two entries are posted, one after the other,
    right before the commit."""
    figures = fenced.figures
    locked = billing.hold_lock(attempt_id=attempt_id, figures=figures)
    job_state = job_count_finished(
        fenced.job_id, "tasks_succeeded", now, submitter_id=figures.submitter_id, release=False
    )
    charged = billing.settle(
        attempt_id=attempt_id, runtime_ms=runtime, charge=True, figures=figures, locked=locked
    )
    if job_state is not None:
        billing.release(job_id=fenced.job_id, submitter_id=figures.submitter_id, locked=locked)
    return charged, job_state


def attempt_fail(
    *,
    attempt_id: int,
    token: str,
    node_id: int,
    failure_class: str,
    exit_code: int | None = None,
    detail: str = "",
    stdout_tail: str = "",
    stderr_tail: str = "",
    reason: str | None = None,
) -> Outcome:
    """The attempt failed. Infrastructure failures are retried elsewhere and not charged; the
    job's own failures and timeouts end the task and are charged for the time used. A failure
    reported for a task whose cancellation was requested ends it as cancelled. `reason` ("thermal")
    goes into the event, and before the detail on the attempt."""
    if reason:
        detail = f"[{reason}] {detail}"
    fenced = _read(attempt_id, token, node_id)
    now = timezone.now()
    runtime = _runtime_ms(fenced, now)
    with transaction.atomic():
        cancelled = _cancel_requested(attempt_id)
        _cas(
            fenced,
            token,
            now,
            state=AttemptState.CANCELLED if cancelled else AttemptState.FAILED,
            finished_at=now,
            runtime_ms=runtime,
            exit_code=exit_code,
            failure_class=failure_class,
            detail=detail[:500],
            stdout_tail=_tail(stdout_tail),
            stderr_tail=_tail(stderr_tail),
        )
        retry = (
            failure_class == FailureClass.INFRA and not cancelled and _attempts_left(fenced.task_id)
        )
        if cancelled:
            outcome, task_state, counter = "cancelled", TaskState.CANCELLED, "tasks_cancelled"
        elif retry:
            outcome, task_state, counter = "requeued", TaskState.QUEUED, None
        else:
            outcome, task_state, counter = "failed", TaskState.FAILED, "tasks_failed"
        replica = fenced.replica > 0 and not retry
        if replica:
            # The slice's lock before the hold's (a settlement's), as its verdict takes them.
            verification.slice_lock(fenced.job_id, fenced.index)
        if retry:
            _requeue_task(fenced.task_id, node_id, now)
        else:
            _finish_task(fenced, task_state, now)
        _task_event(
            fenced,
            "AttemptFailed",
            f"node:{node_id}",
            node_id=node_id,
            runtime_ms=runtime,
            failure_class=failure_class,
            exit_code=exit_code,
            detail=detail[:500],
            outcome=outcome,
            **({"reason": reason} if reason else {}),
        )
        charge = failure_class != FailureClass.INFRA
        if replica and not cancelled and charge:
            # A result (the job's own failure, a timeout) of a verified slice: its verdict pays
            # and counts it.
            verification.result_pending(fenced.ended(), now, spot_checkable=False)
            charged = 0
        else:
            charged = billing.settle(
                attempt_id=attempt_id, runtime_ms=runtime, charge=charge, figures=fenced.figures
            )
        if replica and counter != "tasks_cancelled":
            job_state = verification.slice_decide(fenced.job_id, fenced.index, now)
        else:
            job_state = (
                job_count_finished(
                    fenced.job_id, counter, now, submitter_id=fenced.figures.submitter_id
                )
                if counter
                else None
            )
            if replica:  # cancelled: its slice concludes once every replica has ended
                job_state = verification.slice_decide(fenced.job_id, fenced.index, now) or job_state
        count_attempt(outcome, failure_class)
    if failure_class == FailureClass.INFRA and not cancelled:
        billing.record_outcome(node_id=node_id, success=False)
    if retry:
        transaction.on_commit(_notify)
    return Outcome(task_state, job_state, runtime, charged)


# --- hand-back ----------------------------------------------------------------------------------
# An agent gives an attempt back unfinished because its machine's owner wants the machine
# (docs/operators.md, "The owner's rules"): neither the task's fault nor the node's. So, unlike
# a failure: the task is queued again at once (no backoff), the attempt does not use up one of
# its attempts (the task gets one more, since attempt numbers never repeat), the node's
# reliability is untouched and nothing is charged. The node is excluded for the usual grace, so
# that the task moves to another machine rather than back to the owner's. A hand-back of a task
# whose job is being cancelled ends it as cancelled, as a failure report would.

HAND_BACK_DETAIL = "handed back: "
# The column's bound (a smallint): a task handed back this often uses its attempts up after all.
MAX_ATTEMPTS_BOUND = 32767


def attempt_hand_back(*, attempt_id: int, token: str, node_id: int, reason: str) -> str:
    """Release the lease now. Returns the task's new state (queued, or cancelled)."""
    fenced = _read(attempt_id, token, node_id)
    now = timezone.now()
    with transaction.atomic():
        cancelled = _cancel_requested(attempt_id)
        _cas(
            fenced,
            token,
            now,
            state=AttemptState.CANCELLED if cancelled else AttemptState.LOST,
            finished_at=now,
            runtime_ms=_runtime_ms(fenced, now),
            detail=(HAND_BACK_DETAIL + reason)[:500],
        )
        if cancelled:
            _finish_task(fenced, TaskState.CANCELLED, now)
        else:
            Task.objects.filter(pk=fenced.task_id, current_attempt_id=attempt_id).update(
                state=TaskState.QUEUED,
                current_attempt=None,
                version=F("version") + 1,
                available_at=now,
                max_attempts=Least(F("max_attempts") + 1, MAX_ATTEMPTS_BOUND),
                excluded_nodes=exclude_node(node_id),
            )
        _task_event(
            fenced,
            "AttemptHandedBack",
            f"node:{node_id}",
            node_id=node_id,
            reason=reason[:500],
            outcome="cancelled" if cancelled else "requeued",
        )
        billing.settle(attempt_id=attempt_id, runtime_ms=0, charge=False, figures=fenced.figures)
        count_attempt("cancelled" if cancelled else "requeued", "handed_back")
        if cancelled:
            job_count_finished(
                fenced.job_id, "tasks_cancelled", now, submitter_id=fenced.figures.submitter_id
            )
            if fenced.replica > 0:  # its slice concludes once every replica has ended
                verification.decide_after_commit(fenced.job_id, fenced.index)
        else:
            transaction.on_commit(_notify)
    return TaskState.CANCELLED if cancelled else TaskState.QUEUED


def _cancel_requested(attempt_id: int) -> bool:
    """Whether the attempt, or its job, is to be cancelled: read under the attempt's lock. A
    cancel flags the attempt in its own transaction, and a flag committed between an unlocked
    read and the caller's write would see the task of a cancelled job requeued. The cancel that
    waits on this lock finds the attempt ended and the task queued, and cancels it then
    (jobs.cancellation). The job's flag covers an attempt the cancel could not flag."""
    flagged, job_flag = (
        Attempt.objects.select_for_update(of=("self",))
        .values_list("cancel_requested", "task__job__cancel_requested_at")
        .get(pk=attempt_id)
    )
    return flagged or job_flag is not None


def _notify() -> None:
    from jobs.wakeup import notify_work

    notify_work()


def _attempts_left(task_id: int) -> bool:
    attempts, max_attempts = Task.objects.values_list("attempts", "max_attempts").get(pk=task_id)
    return attempts < max_attempts


def backoff_until(attempts: int, now: datetime) -> datetime:
    from datetime import timedelta

    delay = min(
        settings.JOB_RETRY_BACKOFF_S * 2 ** max(attempts - 1, 0), settings.JOB_RETRY_BACKOFF_MAX_S
    )
    return now + timedelta(seconds=delay)


def _requeue_task(task_id: int, node_id: int, now: datetime) -> None:
    attempts = Task.objects.values_list("attempts", flat=True).get(pk=task_id)
    Task.objects.filter(pk=task_id).update(
        state=TaskState.QUEUED,
        current_attempt=None,
        version=F("version") + 1,
        available_at=backoff_until(attempts, now),
        excluded_nodes=exclude_node(node_id),
    )


def exclude_node(node_id: int) -> Func:
    """The task's exclusions with `node_id` appended (an UPDATE's value)."""
    return Func(F("excluded_nodes"), Value(node_id), function="array_append")


def _finish_task(fenced: Fenced, state: str, now: datetime) -> None:
    Task.objects.filter(pk=fenced.task_id, current_attempt_id=fenced.attempt_id).update(
        state=state, finished_at=now, version=F("version") + 1
    )


_COUNTERS = {"tasks_succeeded", "tasks_failed", "tasks_cancelled"}


def count_attempt(outcome: str, failure_class: str) -> None:
    """Count an ended attempt for /metrics once its transaction commits."""
    after_commit(lambda: metrics.ATTEMPTS.labels(outcome, failure_class).inc())


def job_count_finished(
    job_id: int,
    counter: str,
    now: datetime,
    by: int = 1,
    *,
    submitter_id: int | None = None,
    release: bool = True,
) -> str | None:
    """Count finished tasks; the report that finishes the last task finishes the job and, unless
    told not to (`release` False: the caller gives back what is still held itself, later in its
    transaction), releases the job's hold."""
    assert counter in _COUNTERS
    return _count_and_finish(job_id, counter, now, by, submitter_id, release)


def _count_and_finish(
    job_id: int, counter: str, now: datetime, by: int, submitter_id: int | None, release: bool
) -> str | None:
    params = {
        "s": by if counter == "tasks_succeeded" else 0,
        "f": by if counter == "tasks_failed" else 0,
        "c": by if counter == "tasks_cancelled" else 0,
        "job": job_id,
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(statement("jobs", "count_and_finish"), params)
        succeeded, failed, cancelled, done, final = cursor.fetchone()
    if not done:
        return None
    _finished(job_id, final, succeeded, failed, cancelled, submitter_id, release)
    return final


def _finished(
    job_id: int,
    final: str,
    succeeded: int,
    failed: int,
    cancelled: int,
    submitter_id: int | None,
    release: bool,
) -> None:
    """Record the finish the caller has just made, give back what is still held (if `release`),
    and tell the apps that follow a job's end (jobs.hooks)."""
    event_append(
        stream=f"job:{job_id}",
        type="JobFinished",
        actor="system",
        payload={
            "job_id": job_id,
            "state": final,
            "succeeded": succeeded,
            "failed": failed,
            "cancelled": cancelled,
        },
    )
    if release:
        billing.release(job_id=job_id, submitter_id=submitter_id)
    after_commit(lambda: metrics.JOBS_FINISHED.labels(final).inc())
    hooks.job_finished(job_id, final)
