"""The claim: one short transaction that leases the best task this node can run.

`SELECT … FOR UPDATE OF t SKIP LOCKED` over queued tasks whose hard gates the node passes, in
order of priority, then fit (tasks that need more VRAM first, so a big GPU takes the work only it
can do), then age; then the attempt, the task's new state and the claim's events through the
ledger's door, all in one statement (jobs/sql/claim_*.sql). Concurrent claimers skip each
other's locked rows instead of queueing behind them. A small node picks the same task
through the queue's size classes (jobs.size_class), so that a head of work too big for it is
not read on every claim.
"""

import dataclasses
import json
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.metrics import after_commit
from core.sql import commits_alone, statement
from jobs import metrics
from jobs.models import new_lease_token
from jobs.node_profile import NodeProfile, profile_reread
from ledger.errors import VersionConflict
from ledger.services import event_prepared
from nodes.models import CLAIMABLE_STATES
from nodes.signing import sign

# The claim's statements (jobs/sql/): the queue's pick, or a small node's through its size
# classes (jobs.size_class), then the attempt, the task's move and, for a job's first claim, the
# job's. Each file says what it locks and in which order.
QUEUE_CLAIM, BUCKETED_CLAIM = "claim_queue", "claim_bucketed"
# How many of each size class's first tasks a small node's pick reads (claim_bucketed.sql).
CANDIDATES = 16

# A claim whose statement finds its node moved since it was read (claim_node.sql) reads the node
# again and tries again, this many times at most: a node whose row keeps moving under its claims
# gets nothing this time, and its next claim tries afresh.
_REREADS = 3

# A small node's claim that found nothing free while a task it may run is queued in its classes
# had every candidate held or taken by claims beside it: it looks again after each of these
# pauses (stretched at random, so that a herd of claims does not meet again), before it says
# that nothing is queued and the node waits for work.
_HELD_PAUSES_S = (0.005, 0.01, 0.02)


def _pause(seconds: float) -> None:
    time.sleep(seconds * (1 + random.random()))  # noqa: S311 - jitter, not a secret


def _queued_in(profile: NodeProfile, now: datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statement("jobs", "queued_in_classes"), bucketed_params(profile, now))
        return cursor.fetchone() is not None


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
        # The node as read (jobs/sql/claim_node.sql checks its row still says so).
        "node_version": profile.version,
        "claimable": list(CLAIMABLE_STATES),
        "trusted_min": settings.JOB_TRUSTED_RELIABILITY,
        "verified_min": settings.JOB_TRUST_AFTER_VERIFIED,
        "operator": profile.operator_id,
        "spot_region": profile.price.spot_region,
        "spot_tier": profile.price.spot_tier,
        "spot_seen": profile.price.spot_seen,
        "vram": profile.vram_mb,
        "cores": profile.cpu_cores,
        "ram": profile.ram_mb,
        "disk": profile.disk_mb,
        "gpus": profile.gpu_count,
        "cc": profile.compute_capability,
        "region": profile.region,
        "tier": profile.tier,
        "price": profile.price_per_s,
        "node": profile.node_id,
        # A node that lost the task may take it again once it has waited this long for any
        # other: an exclusion steers a retry elsewhere, it must never strand the task (a fleet
        # of one, or every node having lost it once).
        "reprieve": now - timedelta(seconds=settings.JOB_EXCLUSION_GRACE_S),
        "trusted": profile.trusted,
    }


def bucketed_params(profile: NodeProfile, now: datetime) -> dict[str, Any]:
    """The parameters of a small node's pick."""
    return claim_params(profile, now) | {"buckets": profile.size_classes}


def _signed_spec(
    *, row: tuple, attempt_id: int, spec: dict[str, Any], now: datetime
) -> tuple[dict[str, Any], str]:
    task_id, job_id, index, _, _, _, _, kind, timeout_s, cores, ram, disk, vram, gpus, slices = row[
        :15
    ]
    full = {
        "attempt_id": attempt_id,
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


class NodeMoved(Exception):
    """The claim's statement found the node's row no longer as its profile says."""


def task_claim(*, profile: NodeProfile) -> Lease | None:
    """Lease one task to the node as it is when the task is taken, or None when nothing it can
    run is queued or it takes no work."""
    return claim_current(profile)[0]


def claim_current(profile: NodeProfile) -> tuple[Lease | None, NodeProfile]:
    """`task_claim`, and the node's profile as the claim last read it: the caller's, or the
    node read again when the claim found it had moved (a waiting claim keeps the newer one)."""
    started = time.perf_counter()
    lease = None
    for _ in range(_REREADS + 1):
        if not profile.can_claim:
            break
        try:
            lease = _claim_retrying(profile)
            break
        except NodeMoved:
            fresh = profile_reread(profile)
            profile = fresh or dataclasses.replace(profile, can_claim=False)
    metrics.CLAIM_SECONDS.observe(time.perf_counter() - started)
    metrics.CLAIMS.labels("empty" if lease is None else "leased").inc()
    return lease, profile


def _claim_retrying(profile: NodeProfile) -> Lease | None:
    now = timezone.now()
    lease = _claim(profile, now)
    for pause in _HELD_PAUSES_S if profile.size_classes else ():
        if lease is not None or not _queued_in(profile, now):
            break
        _pause(pause)
        now = timezone.now()
        lease = _claim(profile, now)
    return lease


# The ids of a claim's events that only its statement knows: validated as these stand-ins,
# then written over by the statement with the task's, job's and attempt's own (claim_lease.sql).
_STATEMENT_IDS = {"task_id": 0, "job_id": 0, "index": 0, "attempt_id": 0, "attempt": 0}


def claim_events_params(profile: NodeProfile, expires: datetime) -> dict[str, Any]:
    """The claim's events as its statement appends them: TaskClaimed and JobStarted, validated
    here (ledger.services.event_prepared), the ids in them the statement's."""
    claimed_schema, claimed = event_prepared(
        "TaskClaimed",
        _STATEMENT_IDS
        | {
            "node_id": profile.node_id,
            "lease_expires_at": expires.isoformat(),
            "price_per_s": profile.price_per_s,
        },
    )
    started_schema, started = _started_prepared()
    return {
        "claimed_schema": claimed_schema,
        "claimed": claimed,
        "started_schema": started_schema,
        "started": started,
        "actor": f"node:{profile.node_id}",
    }


@cache
def _started_prepared() -> tuple[int, str]:
    """JobStarted as every claim's statement appends it (its job id the statement's): the same
    payload each time, so validated once."""
    return event_prepared("JobStarted", {"job_id": 0})


def _lease(row: tuple, attempt_id: int, token: str, expires: datetime, now: datetime) -> Lease:
    # Django has psycopg hand jsonb back as text (its JSONField parses it): so must we.
    spec = json.loads(row[6])
    full_spec, signature = _signed_spec(row=row, attempt_id=attempt_id, spec=spec, now=now)
    task_id, job_id = row[0], row[1]
    return Lease(attempt_id, task_id, job_id, token, expires, full_spec, signature)


# A claim that is its own transaction commits without waiting for the WAL's flush
# (`synchronous_commit` off for that transaction only, set by the statement itself through
# core's commit_lazily; its `lazy` parameter). A lease is already something the hub expects to
# lose: a crash of the database can lose the claims of its
# last fraction of a second, whole (attempt, task, events and job together), and what follows
# is a lost lease: the task is queued as before the claim, and the agent that got it is told to
# drop it on its next heartbeat (an unknown token), its completion refused (409). A claim moves
# no money; anything durable that depends on it (its completion, its failure) commits with the
# flush, which writes the claim before it.


@dataclass(frozen=True)
class NewAttempt:
    """What the lease needs of the attempt a claim's statement inserts (its id comes back with
    the row)."""

    lease_token: str
    lease_expires_at: datetime


def claim_statement(
    profile: NodeProfile, now: datetime, *, lazy: bool = False
) -> tuple[str, dict[str, Any], NewAttempt]:
    """The claim's statement for `profile` at `now` (jobs/sql/claim_queue.sql, or
    claim_bucketed.sql for a node with size classes), its parameters, and the attempt it
    inserts (its id, whether the job moved and how many events it appended are the row's last
    three columns); `lazy` for a claim that is its own transaction, which then commits without
    waiting for the WAL's flush."""
    granted = NewAttempt(new_lease_token(), now + lease_duration())
    name = BUCKETED_CLAIM if profile.size_classes else QUEUE_CLAIM
    pick_params = bucketed_params if profile.size_classes else claim_params
    params = (
        pick_params(profile, now)
        | {"lease_token": granted.lease_token, "lease_expires_at": granted.lease_expires_at}
        | claim_events_params(profile, granted.lease_expires_at)
        | {"lazy": lazy}
    )
    return statement("jobs", name), params, granted


def _claim(profile: NodeProfile, now: datetime) -> Lease | None:
    """One claim: its statement, which leases and appends the claim's events (claim_lease.sql).
    Alone, it is its own transaction and commits lazily; in a caller's transaction, a savepoint
    of it. NodeMoved when the statement found the node no longer as `profile` says;
    VersionConflict when the task's stream had moved past the version its row says."""
    alone = commits_alone()
    sql, params, granted = claim_statement(profile, now, lazy=alone)
    with nullcontext() if alone else transaction.atomic():
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                row = cursor.fetchone()
        except IntegrityError:  # the savepoint, if any, rolls back as the error leaves it
            raise VersionConflict("a task's stream moved while it was being claimed") from None
    if row is None:
        raise NodeMoved(profile.node_id)
    if row[0] is None:
        return None
    # Observed once the lease is committed (at once for a claim that is its own transaction).
    waited = (now - row[15]).total_seconds()
    after_commit(lambda: metrics.DISPATCH_SECONDS.observe(max(waited, 0.0)))
    return _lease(row, row[-3], granted.lease_token, granted.lease_expires_at, now)
