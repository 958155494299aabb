from django.db.models import Q, QuerySet

from jobs.models import Job
from ledger.models import Event


def job_timeline(job: Job) -> QuerySet[Event]:
    """Every event of the job and of its tasks. Ordered newest first by the pagination."""
    task_streams = [f"task:{pk}" for pk in job.tasks.values_list("pk", flat=True)]
    return Event.objects.filter(Q(stream=job.stream) | Q(stream__in=task_streams))
