from datetime import datetime

from django.db.models import Q, QuerySet

from jobs.models import Job, Task, TaskState
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
