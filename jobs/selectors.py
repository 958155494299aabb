from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, QuerySet, Sum

from jobs.models import Attempt, Job, JobState, Task, TaskState, Verdict
from ledger.models import Event


def job_timeline(job: Job) -> QuerySet[Event]:
    """Every event of the job and of its tasks. Ordered newest first by the pagination."""
    task_streams = [f"task:{pk}" for pk in job.tasks.values_list("pk", flat=True)]
    return Event.objects.filter(Q(stream=job.stream) | Q(stream__in=task_streams))


def queue_backoff_ends(*, after: datetime) -> datetime | None:
    """When the first requeued task still backing off after `after` becomes claimable, if any
    (one probe of the task_backoff_due index). Nothing announces that moment, so a waiting claim
    sleeps no longer than until it."""
    return (
        Task.objects.filter(state=TaskState.QUEUED, attempts__gt=0, available_at__gt=after)
        .order_by("available_at")
        .values_list("available_at", flat=True)
        .first()
    )


@dataclass(frozen=True)
class JobsFinished:
    succeeded: int
    failed: int
    cancelled: int

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.cancelled


def jobs_finished_since(since: datetime) -> JobsFinished:
    """Jobs that ended at or after `since`, by how: one read of the job_finished index."""
    counts = Job.objects.filter(finished_at__gte=since).aggregate(
        **{
            state.value: Count("pk", filter=Q(state=state))
            for state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
        }
    )
    return JobsFinished(**counts)


@dataclass(frozen=True)
class VerifiedCompute:
    operator_id: int
    runtime_ms: int
    results: int


def verified_compute_by_operator(*, limit: int) -> list[VerifiedCompute]:
    """The operators who delivered the most verified compute: the server-measured runtime of
    their nodes' attempts whose result agreed with another operator's (verdict agreed), most
    first. One grouped statement over the attempt_agreed_node index and the nodes."""
    rows = (
        Attempt.objects.filter(verdict=Verdict.AGREED)
        .values_list("node__operator_id")
        .annotate(runtime=Sum("runtime_ms"), results=Count("*"))
        .order_by("-runtime", "node__operator_id")[:limit]
    )
    return [
        VerifiedCompute(operator_id=operator_id, runtime_ms=runtime or 0, results=results)
        for operator_id, runtime, results in rows
    ]
