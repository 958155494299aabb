"""The body a delivery sends: the job as its API shows it, what it cost, and its outputs."""

import json

from django.urls import reverse
from rest_framework import serializers

from jobs.models import Artifact, Attempt, AttemptState, Job
from jobs.serializers import ArtifactOut, JobOut
from ledger.settlement import settlements_for_attempts
from webhooks.models import WebhookDelivery


def job_cost(job_id: int) -> int:
    """What the job was charged (credit minor units): the sum of its attempts' settlements."""
    attempts = Attempt.objects.filter(task__job_id=job_id).values_list("pk", flat=True)
    return sum(s.charged_minor for s in settlements_for_attempts(attempts).values())


def _artifacts(job_id: int) -> list[dict]:
    """The outputs of the job's succeeded attempts, by slice, then name."""
    artifacts = (
        Artifact.objects.filter(attempt__task__job_id=job_id, attempt__state=AttemptState.SUCCEEDED)
        .select_related("attempt__task")
        .order_by("attempt__task__index", "name")
    )
    return [
        {
            **ArtifactOut(artifact).data,
            "task_index": artifact.attempt.task.index,
            "download_path": reverse("artifact-download", args=[artifact.pk]),
        }
        for artifact in artifacts
    ]


def job_finished_body(delivery: WebhookDelivery) -> str:
    """The JSON text of the delivery: built once, sent unchanged by every attempt."""
    job = Job.objects.get(pk=delivery.job_id)
    payload = {
        "id": delivery.pk,
        "type": "job.finished",
        "created_at": serializers.DateTimeField().to_representation(delivery.created_at),
        "job": {
            **JobOut(job).data,
            "cost_minor": job_cost(job.pk),
            "artifacts": _artifacts(job.pk),
        },
    }
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)
