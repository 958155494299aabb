"""Cancelling a job: queued tasks end at once; running ones on the agent's next heartbeat."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import verification
from jobs.attempts import job_count_finished
from jobs.errors import JobNotCancellable
from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, Job, JobState, Task, TaskState
from jobs.wakeup import notify_work
from ledger.services import NewEvent, event_append, events_append_bulk

# Task ids per UPDATE: however large the job, each statement binds a bounded list and holds
# the locks of a bounded batch of rows.
_CHUNK = 900


@dataclass(frozen=True)
class Cancelled:
    queued_cancelled: int
    running_signalled: int
    job_state: str


def job_cancel(*, job: Job, actor: str) -> Cancelled:
    if job.state not in (JobState.QUEUED, JobState.RUNNING):
        raise JobNotCancellable(f"job {job.pk} is already {job.state}")
    now = timezone.now()
    with transaction.atomic():
        # Queued tasks first: a claim holding one makes us wait and then see it leased, and
        # its attempt is flagged next. Then, until a pass finds none, the tasks requeued
        # meanwhile: a lost lease or an infrastructure failure that held its attempt while we
        # flagged it committed before our flag did, with the task queued again (a requeue
        # made after the flag sees it and ends the task cancelled instead: jobs.leases,
        # jobs.attempts). A requeued task waits out its retry backoff before a claim can take it.
        queued = _cancel_queued(job, now, actor)
        signalled = 0
        while True:
            signalled += _flag_running(job)
            requeued = _cancel_queued(job, now, actor)
            if not requeued:
                break
            queued += requeued
        # The job's own flag, for an attempt no pass above could flag: a claim that took a
        # requeued task between two of them (no retry backoff, or a pass that stalled longer
        # than it). Its heartbeat tells it to stop, and however it ends, it ends cancelled.
        Job.objects.filter(pk=job.pk, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now
        )
        event_append(
            stream=f"job:{job.pk}",
            type="JobCancelRequested",
            actor=actor,
            payload={"job_id": job.pk, "by": actor},
        )
        if queued:
            job_count_finished(job.pk, "tasks_cancelled", now, by=len(queued))
            # A verified slice whose other replicas had ended concludes now (after commit: its
            # lock comes before the hold's, which the count above has taken).
            verification.decide_after_commit(job.pk)
            # Claims passed over the rows held here; one that found nothing else waits for
            # work, and must look again once they are gone (jobs.claim, the small node's pick).
            transaction.on_commit(notify_work)
    job.refresh_from_db()
    return Cancelled(len(queued), signalled, job.state)


def _flag_running(job: Job) -> int:
    """Ask the agents running the job's tasks to stop (they hear it on their next heartbeat)."""
    return Attempt.objects.filter(
        task__job=job, state__in=ACTIVE_ATTEMPT_STATES, cancel_requested=False
    ).update(cancel_requested=True)


def _cancel_queued(job: Job, now: datetime, actor: str) -> list[tuple[int, int, int]]:
    """End the job's queued tasks as cancelled, each with its event; [(id, index, version)]."""
    # Lock them: a concurrent claim (SKIP LOCKED) passes them by, and one that already holds
    # a row makes us wait and then see it leased.
    queued = list(
        Task.objects.select_for_update()
        .filter(job=job, state=TaskState.QUEUED)
        .order_by("id")
        .values_list("id", "index", "version")
    )
    # Set-based: a job of thousands of queued tasks is a few statements, not two per task,
    # so its locks are held for milliseconds, not seconds. The rows are the ones locked
    # above, named by id.
    for start in range(0, len(queued), _CHUNK):
        Task.objects.filter(pk__in=[t[0] for t in queued[start : start + _CHUNK]]).update(
            state=TaskState.CANCELLED, finished_at=now, version=F("version") + 1
        )
    if queued:
        events_append_bulk(
            [
                NewEvent(
                    f"task:{task_id}",
                    "TaskCancelled",
                    {
                        "task_id": task_id,
                        "job_id": job.pk,
                        "index": index,
                        "attempt_id": None,
                        "reason": "cancelled by the submitter",
                    },
                    actor,
                    expected_version=version,
                )
                for task_id, index, version in queued
            ]
        )
    return queued
