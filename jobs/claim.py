"""The claim: one short transaction that leases the best task this node can run.

`SELECT … FOR UPDATE OF t SKIP LOCKED` over queued tasks whose hard gates the node passes, in
order of priority, then fit (tasks that need more VRAM first, so a big GPU takes the work only it
can do), then age; then the attempt, the task's new state and its event. Concurrent claimers skip
each other's locked rows instead of queueing behind them. On SQLite (the demo) writers are
serialised by BEGIN IMMEDIATE, so the same statement without the locking clause is safe.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from computepool.rawsql import insert_row
from jobs.models import Attempt, JobState, TaskState
from jobs.node_profile import NodeProfile
from ledger.services import event_append
from nodes.signing import sign

_CLAIM_SQL = """
SELECT t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind, j.timeout_s,
       j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices
  FROM jobs_task t JOIN jobs_job j ON j.id = t.job_id
 WHERE t.state = 'queued'
   AND t.available_at <= %(now)s
   AND t.min_vram_mb <= %(vram)s
   AND t.cpu_cores <= %(cores)s
   AND t.ram_mb <= %(ram)s
   AND t.disk_mb <= %(disk)s
   AND t.gpu_count <= %(gpus)s
   AND t.min_compute_capability <= %(cc)s
   AND (t.region = '' OR t.region = %(region)s)
   AND (t.tier_allow = '' OR t.tier_allow LIKE %(tier_like)s)
   AND t.price_ceiling >= %(price)s
   AND (t.excluded_nodes NOT LIKE %(node_like)s OR t.available_at <= %(reprieve)s)
   AND (%(trusted)s OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))
 ORDER BY t.priority DESC, t.min_vram_mb DESC, t.id
 LIMIT 1
"""


@dataclass(frozen=True)
class Lease:
    attempt_id: int
    task_id: int
    job_id: int
    lease_token: str
    lease_expires_at: datetime
    spec: dict[str, Any]
    signature: str

    def as_payload(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "lease_token": self.lease_token,
            "lease_expires_at": self.lease_expires_at.isoformat(),
            "spec": self.spec,
            "signature": self.signature,
        }


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.JOB_LEASE_S)


def claim_params(profile: NodeProfile, now: datetime) -> dict[str, Any]:
    """The claim statement's parameters for this node at `now`."""
    return {
        "now": now,
        "vram": profile.vram_mb,
        "cores": profile.cpu_cores,
        "ram": profile.ram_mb,
        "disk": profile.disk_mb,
        "gpus": profile.gpu_count,
        "cc": profile.compute_capability,
        "region": profile.region,
        "tier_like": f"%,{profile.tier},%",
        "price": profile.price_per_s,
        "node_like": f"%,{profile.node_id},%",
        # A node that lost the task may take it again once it has waited this long for any
        # other: an exclusion steers a retry elsewhere, it must never strand the task (a fleet
        # of one, or every node having lost it once).
        "reprieve": now - timedelta(seconds=settings.JOB_EXCLUSION_GRACE_S),
        "trusted": profile.trusted,
    }


def _select_task(profile: NodeProfile, now: datetime) -> tuple | None:
    sql = _CLAIM_SQL
    if connection.vendor == "postgresql":
        sql += " FOR UPDATE OF t SKIP LOCKED"
    with connection.cursor() as cursor:
        cursor.execute(sql, claim_params(profile, now))
        return cursor.fetchone()


def _signed_spec(
    *, row: tuple, attempt: Attempt, spec: dict[str, Any], now: datetime
) -> tuple[dict[str, Any], str]:
    task_id, job_id, index, _, _, _, _, kind, timeout_s, cores, ram, disk, vram, gpus, slices = row
    full = {
        "attempt_id": attempt.pk,
        "task_id": task_id,
        "job_id": job_id,
        "kind": kind,
        "image": spec["image"],
        "command": spec["command"],
        "script": spec["script"],
        "interpreter": spec["interpreter"],
        "env": spec["env"],
        "inputs": spec["inputs"],
        "slice_index": index,
        "slice_count": slices,
        "timeout_s": timeout_s,
        "resources": {
            "cpu_cores": cores,
            "ram_mb": ram,
            "disk_mb": disk,
            "vram_mb": vram,
            "gpus": gpus,
        },
        "issued_at": now.isoformat(),
    }
    return full, sign(full)


def task_claim(*, profile: NodeProfile) -> Lease | None:
    """Lease one task to the node, or None when nothing it can run is queued."""
    if not profile.can_claim:
        return None
    now = timezone.now()
    with transaction.atomic():
        row = _select_task(profile, now)
        if row is None:
            return None
        task_id, job_id, index, attempts, version, job_state, spec = row[:7]
        if isinstance(spec, str):  # SQLite hands JSON back as text
            spec = json.loads(spec)
        expires = now + lease_duration()
        attempt = Attempt(
            task_id=task_id,
            node_id=profile.node_id,
            number=attempts + 1,
            leased_at=now,
            lease_expires_at=expires,
            price_per_s=profile.price_per_s,
        )
        insert_row(attempt)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs_task SET state = %s, attempts = %s, version = %s, "
                "current_attempt_id = %s WHERE id = %s",
                [TaskState.LEASED, attempts + 1, version + 1, attempt.pk, task_id],
            )
        event_append(
            stream=f"task:{task_id}",
            type="TaskClaimed",
            actor=f"node:{profile.node_id}",
            expected_version=version,
            payload={
                "task_id": task_id,
                "job_id": job_id,
                "index": index,
                "attempt_id": attempt.pk,
                "attempt": attempt.number,
                "node_id": profile.node_id,
                "lease_expires_at": expires.isoformat(),
                "price_per_s": profile.price_per_s,
            },
        )
        if job_state == JobState.QUEUED:
            _mark_job_running(job_id)
        full_spec, signature = _signed_spec(row=row, attempt=attempt, spec=spec, now=now)
    return Lease(attempt.pk, task_id, job_id, attempt.lease_token, expires, full_spec, signature)


def _mark_job_running(job_id: int) -> None:
    # Compare-and-set: of two first claims on one job's tasks, one moves it and writes the event.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET state = %s WHERE id = %s AND state = %s",
            [JobState.RUNNING, job_id, JobState.QUEUED],
        )
        won = cursor.rowcount == 1
    if won:
        event_append(
            stream=f"job:{job_id}", type="JobStarted", actor="system", payload={"job_id": job_id}
        )
