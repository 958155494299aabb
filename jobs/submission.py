"""Submitting a job: the job, its tasks, its event and its credit hold in one transaction."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from jobs import billing, hooks
from jobs.models import Job, JobKind, Task
from jobs.serializers import job_max_cost
from jobs.verification import verification_open_requested
from jobs.wakeup import notify_work
from ledger.canonical import canonical_json, sha256_hex
from ledger.errors import IdempotencyConflict
from ledger.idempotency import idempotency_key_lock
from ledger.services import event_append

DEFAULT_IMAGES = {"sh": "computepool/busybox:1", "python": "computepool/python:3"}


@dataclass(frozen=True)
class Submitted:
    job: Job
    created: bool  # False: an idempotent replay returned the original job


def _spec(data: dict[str, Any]) -> dict[str, Any]:
    if data["kind"] == JobKind.SCRIPT:
        interpreter = data.get("interpreter") or "sh"
        return {
            "image": data.get("image") or DEFAULT_IMAGES[interpreter],
            "command": [],
            "script": data["script"],
            "interpreter": interpreter,
            "env": data.get("env") or {},
            "inputs": data.get("inputs") or {},
        }
    return {
        "image": data["image"],
        "command": data["command"],
        "script": None,
        "interpreter": None,
        "env": data.get("env") or {},
        "inputs": data.get("inputs") or {},
    }


def job_submit(
    *, submitter_id: int, data: dict[str, Any], idempotency_key: str | None = None
) -> Submitted:
    """Create a job from validated input (see jobs.serializers.JobIn).

    The same idempotency key with the same request returns the original job; with a different
    request it raises IdempotencyConflict. Not enough credits for the hold raises
    InsufficientFunds and nothing is written.
    """
    fingerprint = sha256_hex(canonical_json(data))
    req = data["requirements"]
    max_cost = job_max_cost(data)
    asked = data.get("verification") or {"replicas": 1, "quorum": 1}
    with transaction.atomic():
        if idempotency_key:
            idempotency_key_lock(f"job:{submitter_id}:{idempotency_key}")
            original = Job.objects.filter(
                submitter_id=submitter_id, idempotency_key=idempotency_key
            ).first()
            if original is not None:
                return _replay(original, fingerprint, idempotency_key)
        job = Job.objects.create(
            submitter_id=submitter_id,
            name=data.get("name", ""),
            kind=data["kind"],
            spec=_spec(data),
            min_vram_mb=req["min_vram_mb"],
            cpu_cores=req["cpu_cores"],
            ram_mb=req["ram_mb"],
            disk_mb=req["disk_mb"],
            gpu_count=req["gpu_count"],
            gpu_tiers=sorted(set(req["gpu_tiers"])),
            min_compute_capability=req["min_compute_capability"],
            region=req["region"],
            priority=data["priority"],
            slices=data["slices"],
            timeout_s=data["timeout_s"],
            max_attempts=data["max_attempts"],
            price_ceiling=data["price_ceiling"],
            replicas=asked["replicas"],
            quorum=asked["quorum"],
            idempotency_key=idempotency_key,
            request_fingerprint=fingerprint,
            max_cost=max_cost,
            retention_days=data.get("retention_days") or settings.JOB_ARTIFACT_RETENTION_DAYS,
        )
        # A verified job's slices each run as replicas 1…N (jobs.verification); a plain one's
        # as replica 0.
        replicas = range(1, job.replicas + 1) if job.replicas > 1 else (0,)
        Task.objects.bulk_create(
            [
                job.task(i, replica=replica, at=job.created_at)
                for i in range(job.slices)
                for replica in replicas
            ],
            batch_size=1000,
        )
        if job.replicas > 1:
            verification_open_requested(job)
        event_append(
            stream=job.stream,
            type="JobSubmitted",
            actor=f"user:{submitter_id}",
            expected_version=0,
            payload={
                "job_id": job.pk,
                "submitter_id": submitter_id,
                "kind": job.kind,
                "slices": job.slices,
                "priority": job.priority,
                "timeout_s": job.timeout_s,
                "max_attempts": job.max_attempts,
                "price_ceiling": job.price_ceiling,
                "max_cost": max_cost,
                "requirements": req,
                "replicas": job.replicas,
                "quorum": job.quorum,
                "retention_days": job.retention_days,
            },
        )
        billing.hold(job=job)
        hooks.job_submitted(job, data)
        transaction.on_commit(notify_work)
    return Submitted(job, True)


def _replay(original: Job, fingerprint: str, key: str | None) -> Submitted:
    if original.request_fingerprint != fingerprint:
        raise IdempotencyConflict(f"idempotency key {key!r} was already used for another job")
    return Submitted(original, False)
