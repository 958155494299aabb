"""The claim: one short transaction that leases the best task this node can run.

`SELECT … FOR UPDATE OF t SKIP LOCKED` over queued tasks whose hard gates the node passes, in
order of priority, then fit (tasks that need more VRAM first, so a big GPU takes the work only it
can do), then age; then the attempt, the task's new state and its event. Concurrent claimers skip
each other's locked rows instead of queueing behind them. A small node picks the same task
through the queue's size classes (jobs.size_class), so that a head of work too big for it is
not read on every claim.
"""

import json
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from computepool.rawsql import LAZY_COMMIT, commits_alone, insert_select_lists
from jobs.models import Attempt, new_lease_token
from jobs.node_profile import NodeProfile
from ledger.services import NewEvent, events_append_bulk
from nodes.signing import sign

_COLUMNS = """t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind,
       j.timeout_s, j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices"""


def _squeezed(sql: str) -> str:
    # Every run of whitespace as one space (no literal in these statements holds one): the
    # claim's whole text must stay within what psycopg caches (4096 characters).
    return " ".join(sql.split())


# The hard gates a queued task can stop passing after its submission: it is claimed, cancelled,
# or requeued with a backoff, the node that lost it excluded and an attempt spent.
_LIVE_TERMS = """t.available_at <= %(now)s
   AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint] OR t.available_at <= %(reprieve)s)
   AND (%(trusted)s OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))"""
# The gates fixed at submission, on the task's own (denormalised) columns.
_FIT_TERMS = """t.cpu_cores <= %(cores)s
   AND t.ram_mb <= %(ram)s
   AND t.disk_mb <= %(disk)s
   AND t.gpu_count <= %(gpus)s
   AND t.min_compute_capability <= %(cc)s
   AND (t.region = '' OR t.region = %(region)s)
   AND (t.tier_allow = '{}' OR t.tier_allow @> ARRAY[%(tier)s::varchar])
   AND t.price_ceiling >= %(price)s"""
# Outside COALESCE only what an index reads: the queue's partial-index predicate and the VRAM
# bound (an index condition of both queue indexes). The rest is one opaque term to the planner,
# which estimates it passes half the rows instead of multiplying a default third per bound
# into "one row": with that estimate the plan it builds once for the prepared statement (its
# generic plan) walks the queue's index in order and stops at the first task, as the plan
# built for each call's values does, so PostgreSQL keeps it and stops planning the claim on
# every call. Multiplied, the generic plan sorted every queued task and was never chosen.
_LIVE_GATES = f"t.state = 'queued' AND COALESCE({_LIVE_TERMS}, false)"
# Every hard gate.
_GATES = f"""t.state = 'queued'
   AND t.min_vram_mb <= %(vram)s
   AND COALESCE({_LIVE_TERMS}
   AND {_FIT_TERMS}, false)"""
_ORDER = "t.priority DESC, t.min_vram_mb DESC, t.id"

_CLAIM_SQL = f"""
SELECT {_COLUMNS}
  FROM jobs_task t JOIN jobs_job j ON j.id = t.job_id
 WHERE {_GATES}
 ORDER BY {_ORDER}
 LIMIT 1
"""  # noqa: S608 - constants
# Any other node's pick on PostgreSQL: the queue's statement, the task locked as it is read.
_QUEUE_PICK = f"{_CLAIM_SQL} FOR UPDATE OF t SKIP LOCKED"

# A small node's pick (jobs.size_class), which locks one row. First the first CANDIDATES tasks
# of each size class the node fits, in the queue's order, read without locks, and all of them
# merged into that order; then each candidate in turn locked by id if no one else holds it
# (`SKIP LOCKED`, its live gates checked again on the row as it is now), stopping at the first:
# nested loops under LIMIT 1 pull one candidate at a time (the LIMIT sits below the job's join,
# so no plan for that join can make it read, and lock, the candidates past the first). So the
# node gets the first task in the queue's order that no one holds, as the queue's own pick
# would, unless a class has CANDIDATES or more rows at its top held or taken since the
# statement began (a herd of claims woken together, a cancel): it then passes over to the
# other classes, and when every class is held so it finds nothing and looks again
# (`_HELD_PAUSES_S`). Locking each class's free head instead and keeping the best would hold the
# other heads, still queued, through every such claim: under steady claims from nodes that fit
# more, a node whose only task is one of them would seldom find it free. The gates are written
# once, in a CTE inlined into the reader (the lock is taken on `jobs_task` itself: a locking
# clause does not reach into a WITH query).
CANDIDATES = 16
_BUCKETED_PICK = _squeezed(
    f"""
WITH q AS NOT MATERIALIZED (
     SELECT t.* FROM jobs_task t WHERE {_GATES})
SELECT {_COLUMNS}
  FROM (SELECT t.* FROM (
               SELECT t.id, t.priority, t.min_vram_mb
                 FROM unnest(%(buckets)s::smallint[]) AS b(k)
                CROSS JOIN LATERAL (
                      SELECT * FROM q t WHERE t.size_class = b.k ORDER BY {_ORDER}
                       LIMIT {CANDIDATES}) t
                ORDER BY {_ORDER}) AS c
         CROSS JOIN LATERAL (
               SELECT t.* FROM jobs_task t
                WHERE t.id = c.id AND {_LIVE_GATES} FOR UPDATE SKIP LOCKED) t
         LIMIT 1) t
  JOIN jobs_job j ON j.id = t.job_id
"""  # noqa: S608 - constants
)

# Whether a task the node may run is queued in its classes at all, locks aside.
_ANY_QUEUED_BUCKETED = _squeezed(
    f"""
SELECT 1 FROM unnest(%(buckets)s::smallint[]) AS b(k)
 WHERE EXISTS (SELECT 1 FROM jobs_task t WHERE t.size_class = b.k AND {_GATES})
 LIMIT 1
"""  # noqa: S608 - constants
)
# A small node's claim that found nothing free while a task it may run is queued in its classes
# had every candidate held or taken by claims beside it: it looks again after each of these
# pauses (stretched at random, so that a herd of claims does not meet again), before it says
# that nothing is queued and the node waits for work.
_HELD_PAUSES_S = (0.005, 0.01, 0.02)


def _pause(seconds: float) -> None:
    time.sleep(seconds * (1 + random.random()))  # noqa: S311 - jitter, not a secret


def _queued_in(profile: NodeProfile, now: datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_ANY_QUEUED_BUCKETED, bucketed_params(profile, now))
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


def task_claim(*, profile: NodeProfile) -> Lease | None:
    """Lease one task to the node, or None when nothing it can run is queued."""
    if not profile.can_claim:
        return None
    now = timezone.now()
    lease = _claim(profile, now)
    for pause in _HELD_PAUSES_S if profile.size_classes else ():
        if lease is not None or not _queued_in(profile, now):
            break
        _pause(pause)
        now = timezone.now()
        lease = _claim(profile, now)
    return lease


def _claimed_payload(profile: NodeProfile, expires: datetime, **refs: Any) -> dict[str, Any]:
    return {
        "task_id": refs["task_id"],
        "job_id": refs["job_id"],
        "index": refs["index"],
        "attempt_id": refs["attempt_id"],
        "attempt": refs["number"],
        "node_id": profile.node_id,
        "lease_expires_at": expires.isoformat(),
        "price_per_s": profile.price_per_s,
    }


def _lease(row: tuple, attempt_id: int, token: str, expires: datetime, now: datetime) -> Lease:
    # Django has psycopg hand jsonb back as text (its JSONField parses it): so must we.
    spec = json.loads(row[6])
    full_spec, signature = _signed_spec(row=row, attempt_id=attempt_id, spec=spec, now=now)
    task_id, job_id = row[0], row[1]
    return Lease(attempt_id, task_id, job_id, token, expires, full_spec, signature)


# The claim's statement: pick and lock the task, insert its attempt, move it and, for a job's
# first claim, move the job. The parts take their locks in one order (the task, then the job).
# The job's CAS re-reads its row after any lock wait (READ COMMITTED), so of two first claims
# on one job one moves it. It returns the task as picked (its version before the claim), the
# attempt's id and whether the job moved; the claim's events follow in the same transaction
# (`_claim`). A claim that is its own transaction commits lazily (`_LAZY_COMMIT`, below).
_STATEMENT = _squeezed(
    """
WITH pick AS MATERIALIZED ({pick}),
att AS (
    INSERT INTO jobs_attempt ({att_columns}) SELECT {att_values} FROM pick RETURNING id, task_id
),
moved AS (
    UPDATE jobs_task SET state = 'leased', attempts = pick.attempts + 1,
           version = pick.version + 1, current_attempt_id = att.id
      FROM pick JOIN att ON att.task_id = pick.id
     WHERE jobs_task.id = pick.id
),
started AS (
    UPDATE jobs_job SET state = 'running' FROM pick
     WHERE jobs_job.id = pick.job_id AND pick.state = 'queued' AND jobs_job.state = 'queued'
    RETURNING jobs_job.id
)
SELECT pick.*, att.id, EXISTS (SELECT 1 FROM started)
  FROM pick JOIN att ON att.task_id = pick.id{lazy}
"""
)
# A claim that is its own transaction commits without waiting for the WAL's flush
# (`synchronous_commit` off for that transaction only, set by the statement itself). A lease is
# already something the hub expects to lose: a crash of the database can lose the claims of its
# last fraction of a second, whole (attempt, task, events and job together), and what follows
# is a lost lease: the task is queued as before the claim, and the agent that got it is told to
# drop it on its next heartbeat (an unknown token), its completion refused (409). A claim moves
# no money; anything durable that depends on it (its completion, its failure) commits with the
# flush, which writes the claim before it.
_LAZY_COMMIT = f" CROSS JOIN {LAZY_COMMIT} AS lazy"


@dataclass(frozen=True)
class NewAttempt:
    """What the lease needs of the attempt a claim's statement inserts (its id comes back with
    the row)."""

    lease_token: str
    lease_expires_at: datetime


# The statement's text by pick and attempt lists: each of those is built once per process and
# shape, so the key's strings are the same objects (and hashes) every call.
_statements: dict[tuple[str, ...], str] = {}


def claim_statement(
    profile: NodeProfile, now: datetime, *, lazy: bool = False
) -> tuple[str, dict[str, Any], NewAttempt]:
    """The claim's statement for `profile` at `now`, its parameters, and the attempt it inserts
    (its id and whether the job moved are the row's last two columns); `lazy` for a claim that
    is its own transaction, which then commits without waiting for the WAL's flush. The
    attempt's columns are a new attempt's: what the statement supplies (the task, the number,
    the lease's start, the node's price) are expressions, the node, the token and the expiry
    parameters, and every other column its default, written into the text once."""
    granted = NewAttempt(new_lease_token(), now + lease_duration())
    att_columns, att_values, params = insert_select_lists(
        Attempt,
        name="a",
        exprs={
            "task_id": "pick.id",
            "number": "pick.attempts + 1",
            "leased_at": "%(now)s",
            "price_per_s": "%(price)s",
        },
        values={
            "node_id": profile.node_id,
            "lease_token": granted.lease_token,
            "lease_expires_at": granted.lease_expires_at,
        },
    )
    pick = _BUCKETED_PICK if profile.size_classes else _QUEUE_PICK
    key = (pick, att_columns, att_values, lazy)
    sql = _statements.get(key)
    if sql is None:
        sql = _statements[key] = _STATEMENT.format(
            pick=pick,
            att_columns=att_columns,
            att_values=att_values,
            lazy=_LAZY_COMMIT if lazy else "",
        )
    pick_params = bucketed_params if profile.size_classes else claim_params
    params |= pick_params(profile, now)
    return sql, params, granted


def _claim(profile: NodeProfile, now: datetime) -> Lease | None:
    """One claim's transaction: the statement, then TaskClaimed at the task's version before
    the claim and, when the job moved, JobStarted at its stream's end, in one append."""
    sql, params, granted = claim_statement(profile, now, lazy=commits_alone())
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        attempt_id, job_moved = row[-2], row[-1]
        task_id, job_id, index, attempts, version = row[:5]
        events = [
            NewEvent(
                f"task:{task_id}",
                "TaskClaimed",
                _claimed_payload(
                    profile,
                    granted.lease_expires_at,
                    task_id=task_id,
                    job_id=job_id,
                    index=index,
                    attempt_id=attempt_id,
                    number=attempts + 1,
                ),
                f"node:{profile.node_id}",
                expected_version=version,
            )
        ]
        if job_moved:
            events.append(NewEvent(f"job:{job_id}", "JobStarted", {"job_id": job_id}, "system"))
        events_append_bulk(events, recorded_at=now)
    return _lease(row, attempt_id, granted.lease_token, granted.lease_expires_at, now)
