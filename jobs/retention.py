"""Retention: a job's outputs are deleted once its retention has run out after it ended.

A job gets its deadline (`artifacts_expire_at`) when it ends (jobs/sql/count_and_finish.sql).
Beat then deletes the stored files of jobs past it, one job per transaction: the job's row is
taken with SKIP LOCKED, so two runs at once share the work and never do a job twice; the files
go first and the rows are marked after, so a run that dies between the two leaves the job due,
and the next run deletes what is left (deleting a file already gone is no error). The rows
stay, with each output's name, size and checksum, and the job's log says when (ArtifactsExpired).
"""

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from jobs import artifact_storage
from jobs.models import Artifact, Job
from ledger.services import event_append


def artifacts_expire(*, now: datetime | None = None, limit: int | None = None) -> int:
    """Delete the outputs of up to `limit` jobs whose deadline has passed; how many jobs."""
    now = now or timezone.now()
    limit = settings.JOB_ARTIFACT_EXPIRY_BATCH if limit is None else limit
    done = 0
    while done < limit:
        with transaction.atomic():
            job = (
                Job.objects.select_for_update(skip_locked=True)
                .filter(artifacts_expire_at__lte=now, artifacts_expired_at__isnull=True)
                .order_by("artifacts_expire_at")
                .only("id", "retention_days")
                .first()
            )
            if job is None:
                break
            _expire(job, now)
        done += 1
    return done


def _expire(job: Job, now: datetime) -> None:
    kept = Artifact.objects.filter(attempt__task__job=job, deleted_at__isnull=True)
    names = list(kept.values_list("file", flat=True))
    if not names:
        # Nothing was kept (no outputs, or none left): the job leaves the deadline's index
        # with nothing to say.
        Job.objects.filter(pk=job.pk).update(artifacts_expire_at=None)
        return
    total = kept.aggregate(total=Sum("size"))["total"]
    for name in names:
        artifact_storage.delete(name)
    kept.update(deleted_at=now)
    Job.objects.filter(pk=job.pk).update(artifacts_expired_at=now)
    event_append(
        stream=job.stream,
        type="ArtifactsExpired",
        actor="system",
        payload={
            "job_id": job.pk,
            "retention_days": job.retention_days,
            "artifacts": len(names),
            "bytes": total,
        },
    )
