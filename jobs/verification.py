"""Result verification by replication, as BOINC's adaptive replication does it.

A slice is *verified* when its result is decided by comparing the results of several nodes of
distinct operators instead of taken on one node's word:

- **Asked for**: a job with `verification: {"replicas": N, "quorum": Q}` runs each slice as N
  replica tasks (jobs.submission). The submitter pays every replica whose result agrees.
- **Spot-checks**: when a node the hub does not trust yet (nodes.trust) finishes a slice of a
  job that asked for nothing, a share of those results (nodes.trust.spot_check_share) is checked:
  the slice gets a replica only a trusted node of another operator may take. The submitter pays
  for one agreeing result, as for any slice; the platform pays the other agreeing ones, from
  `platform:verification` (ledger.settlement.spot_check_settle).

A result is the exit code, how the attempt ended, and the name and sha256 of every output
artifact. Its replica's attempt ends with verdict `pending` and is neither paid nor counted on
its job until every replica of its slice has ended; then, under the slice's Verification row
(the lock that serialises its verdict):

- a group of at least Q operators with one result, larger than any other group, makes it the
  slice's result: each of its attempts is paid (`agreed`), each other one is not (`rejected`),
  counts against its node's reliability, and JOB_REJECTIONS_TO_QUARANTINE rejections within
  JOB_REJECTION_WINDOW_H quarantine the node; each agreeing node has one more verified result
  (how trust is earned);
- otherwise, while the slice has run fewer replicas than its budget, one more replica is added;
- otherwise the slice ends with no quorum: nobody is paid, the slice counts as failed and the
  job fails with that reason (its hold is released when it ends, as for any job).

One operator's results count once, however many of its nodes ran the slice: the claim keeps
replicas apart by operator (jobs/sql/task_live_gates.sql), and two claims at the same instant
could still both pass it, so the verdict counts the first result of each operator and leaves
the others undecided (settled at zero).
"""

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from jobs import billing
from jobs.models import (
    TERMINAL_TASK_STATES,
    Artifact,
    Attempt,
    AttemptState,
    Job,
    Task,
    TaskState,
    Verdict,
    Verification,
    VerificationReason,
    VerificationState,
)
from ledger import settlement
from ledger.services import event_append
from nodes.models import CLAIMABLE_STATES, Node
from nodes.services import node_record_outcome
from nodes.services.quarantine import Rule, node_quarantine
from nodes.trust import spot_check_share


def _budget(first: int, max_attempts: int) -> int:
    """The most replicas a slice may run: those it starts with, and one more for each attempt
    the job allows beyond its first (max_attempts 3: two more at most, to break disagreements)."""
    return first + max(max_attempts - 1, 0)


def verification_open_requested(job: Job) -> None:
    """At submission, in its transaction: one open Verification per slice of a job that asked
    for replicas (its tasks are the caller's)."""
    Verification.objects.bulk_create(
        [
            Verification(
                job=job,
                index=index,
                reason=VerificationReason.REQUESTED,
                quorum=job.quorum,
                budget=_budget(job.replicas, job.max_attempts),
                created_at=job.created_at,
            )
            for index in range(job.slices)
        ],
        batch_size=1000,
    )


# --- the hooks of the attempt's reports (jobs.attempts, jobs.leases, jobs.cancellation) ---------


@dataclass(frozen=True)
class Ended:
    """What a report knows of the attempt that just ended, for its slice's verification."""

    attempt_id: int
    task_id: int
    job_id: int
    index: int
    replica: int
    node_id: int
    operator_id: int
    reliability: float
    verified_results: int


def result_pending(ended: Ended, now: datetime, *, spot_checkable: bool) -> bool:
    """Called in the transaction of a report that ended an attempt with a result (success, the
    job's own failure, a timeout), before it settles and counts it. True when the result is
    left pending for its slice's verdict: the caller then neither settles nor counts it, and
    calls `slice_decide` next. `spot_checkable`: a success of a slice nobody asked to verify,
    which the hub may choose to check."""
    if ended.replica == 0:
        if not (spot_checkable and _spot_check_due(ended)):
            return False
        _spot_check_open(ended, now)
    Attempt.objects.filter(pk=ended.attempt_id).update(verdict=Verdict.PENDING)
    return True


def _spot_check_due(ended: Ended) -> bool:
    share = spot_check_share(ended.reliability, ended.verified_results)
    if share <= 0 or random.random() >= share:  # noqa: S311 - a sample, not a secret
        return False
    # Only a trusted node of another operator may check: with none in the pool, nobody can, and
    # the result stands on the node's word, as it did before the pool had one (docs/nodes.md).
    return bool(_checker_operators() - {ended.operator_id})


# (monotonic deadline, operators of trusted nodes that take work): per process, a few seconds.
# Every result of an untrusted node asks, and the answer moves only as nodes earn trust or
# leave service: one read of the nodes per process every few seconds, not one per completion.
_CHECKERS_CACHE_S = 5
_checkers: list[tuple[float, frozenset[int]]] = []


def forget_checkers() -> None:
    """Read the pool's trusted nodes afresh on the next ask (tests that change them)."""
    _checkers.clear()


def _checker_operators() -> frozenset[int]:
    """Two operators (at most) with a trusted node that takes work: enough to know whether one
    other than a given operator has one."""
    now = time.monotonic()
    if not _checkers or _checkers[0][0] <= now:
        found = frozenset(
            Node.objects.filter(
                state__in=CLAIMABLE_STATES,
                reliability__gte=settings.JOB_TRUSTED_RELIABILITY,
                verified_results__gte=settings.JOB_TRUST_AFTER_VERIFIED,
            )
            .order_by()
            .values_list("operator_id", flat=True)
            .distinct()[:2]
        )
        _checkers[:] = [(now + _CHECKERS_CACHE_S, found)]
    return _checkers[0][1]


def _spot_check_open(ended: Ended, now: datetime) -> None:
    max_attempts = Job.objects.values_list("max_attempts", flat=True).get(pk=ended.job_id)
    Verification.objects.create(
        job_id=ended.job_id,
        index=ended.index,
        reason=VerificationReason.SPOT_CHECK,
        quorum=2,
        budget=_budget(2, max_attempts),
        created_at=now,
    )
    _replica_add(ended.job_id, ended.index, VerificationReason.SPOT_CHECK, now, why="spot-check")


def slice_lock(job_id: int, index: int) -> None:
    """Take the slice's verification lock in the caller's transaction (before the job's hold,
    as `slice_decide` takes them)."""
    list(
        Verification.objects.select_for_update()
        .filter(job_id=job_id, index=index)
        .values_list("pk", flat=True)
    )


def slice_decide(job_id: int, index: int, now: datetime | None = None) -> str | None:
    """Decide the slice's verification if every replica of it has ended (else do nothing), in
    the caller's transaction: pay, reject, add a replica or give up, as the module says. Returns
    the state the job ended in when this verdict finished it, else None."""
    now = now or timezone.now()
    with transaction.atomic():
        verification = (
            Verification.objects.select_for_update()
            .filter(job_id=job_id, index=index, state=VerificationState.OPEN)
            .first()
        )
        if verification is None:
            return None
        tasks = list(
            Task.objects.filter(job_id=job_id, index=index).values_list("id", "state", "replica")
        )
        if any(state not in TERMINAL_TASK_STATES for _, state, _ in tasks):
            return None  # a replica still runs or waits: its end decides
        job = Job.objects.values("submitter_id", "cancel_requested_at").get(pk=job_id)
        # The hold's lock before the job's row (a replica added, the slice counted): the order
        # of every completion (jobs.attempts), which takes the hold and then counts.
        billing.holds_lock({job_id}, releasing_to={job["submitter_id"]})
        results = _pending(job_id, index)
        cancelled = job["cancel_requested_at"] is not None or any(
            state == TaskState.CANCELLED for _, state, _ in tasks
        )
        if cancelled:
            return _conclude(verification, results, tasks, None, now, job["submitter_id"], True)
        votes = _first_of_each_operator(results)
        ranked = Counter(r.key for r in votes).most_common(2)
        if (
            ranked
            and ranked[0][1] >= verification.quorum
            and (len(ranked) == 1 or ranked[0][1] > ranked[1][1])
        ):
            canonical = ranked[0][0]
            return _conclude(verification, results, tasks, canonical, now, job["submitter_id"])
        if len(tasks) < verification.budget:
            why = (
                f"{len(votes)} operators' results, the largest group "
                f"{ranked[0][1] if ranked else 0} short of a quorum of {verification.quorum}"
            )
            _replica_add(job_id, index, verification.reason, now, why=why)
            return None
        return _conclude(verification, results, tasks, None, now, job["submitter_id"])


def verifications_decide_due(job_id: int | None = None) -> int:
    """Decide every open verification whose replicas have all ended (of one job, or all): for
    the paths that end a replica where the slice's lock cannot be taken in order (the reaper's
    batches, a cancel), run after they commit, and by the reaper each tick for any left behind.
    One query finds them (the open ones through their partial index); idempotent: a decided
    slice is not open."""
    busy = Task.objects.filter(job_id=OuterRef("job_id"), index=OuterRef("index")).exclude(
        state__in=TERMINAL_TASK_STATES
    )
    due = Verification.objects.filter(state=VerificationState.OPEN).filter(~Exists(busy))
    if job_id is not None:
        due = due.filter(job_id=job_id)
    slices = list(due.order_by("id").values_list("job_id", "index")[:100])
    for vjob, vindex in slices:
        slice_decide(vjob, vindex)
    return len(slices)


def decide_after_commit(job_id: int, index: int | None = None) -> None:
    """Decide the slice (or every open slice of the job) once the caller's transaction has
    committed, in a transaction of its own."""

    def run() -> None:
        if index is None:
            verifications_decide_due(job_id)
        else:
            slice_decide(job_id, index)

    transaction.on_commit(run)


# --- the verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Result:
    attempt_id: int
    replica: int
    node_id: int
    operator_id: int
    key: str  # the result, as compared: canonical JSON of `result`
    result: dict[str, Any]
    runtime_ms: int
    price_per_s: int
    leased_at: datetime
    timeout_s: int


def _pending(job_id: int, index: int) -> list[_Result]:
    rows = list(
        Attempt.objects.filter(task__job_id=job_id, task__index=index, verdict=Verdict.PENDING)
        .order_by("finished_at", "id")
        .values_list(
            "id",
            "task__replica",
            "node_id",
            "node__operator_id",
            "state",
            "exit_code",
            "failure_class",
            "runtime_ms",
            "price_per_s",
            "leased_at",
            "task__job__timeout_s",
        )
    )
    outputs: dict[int, list[dict[str, str]]] = {}
    for attempt_id, name, sha256 in (
        Artifact.objects.filter(attempt_id__in=[r[0] for r in rows])
        .order_by("name")
        .values_list("attempt_id", "name", "sha256")
    ):
        outputs.setdefault(attempt_id, []).append({"name": name, "sha256": sha256})
    found = []
    for row in rows:
        attempt_id, replica, node_id, operator_id, state, exit_code, failure = row[:7]
        runtime, price, leased_at, timeout_s = row[7:]
        result = {
            "exit_code": exit_code,
            "failure": "" if state == AttemptState.SUCCEEDED else failure,
            "artifacts": outputs.get(attempt_id, []),
        }
        key = json.dumps(result, sort_keys=True, separators=(",", ":"))
        found.append(
            _Result(attempt_id, replica, node_id, operator_id, key, result, runtime or 0, price,
                    leased_at, timeout_s)
        )  # fmt: skip
    return found


def _first_of_each_operator(results: list[_Result]) -> list[_Result]:
    seen: set[int] = set()
    votes = []
    for r in results:
        if r.operator_id not in seen:
            seen.add(r.operator_id)
            votes.append(r)
    return votes


def _conclude(
    verification: Verification,
    results: list[_Result],
    tasks: list[tuple[int, str, int]],
    canonical: str | None,
    now: datetime,
    submitter_id: int,
    cancelled: bool = False,
) -> str | None:
    """The verdict: agreed on `canonical`, or none (no quorum, or the job was cancelled first).
    Settles every pending result, counts the slice's tasks on the job, records SliceVerified."""
    votes = {r.attempt_id for r in _first_of_each_operator(results)}
    agreed = [r for r in results if canonical is not None and r.key == canonical]
    agreed = [r for r in agreed if r.attempt_id in votes]
    rejected = [
        r for r in results if canonical is not None and r.key != canonical and r.attempt_id in votes
    ]
    undecided = [r for r in results if r not in agreed and r not in rejected]
    # A cancelled slice's results are paid as the work the submitter asked for before it
    # cancelled, unverified: nobody's trust moves either way.
    paid = agreed if not cancelled else list(results)
    submitter_pays = _submitter_pays(verification.reason, paid)
    for r in results:
        if r in paid:
            _settle(r, verification, charge=True, platform=r.attempt_id not in submitter_pays)
        else:
            _settle(r, verification, charge=False, platform=False)
    for verdict, group in (
        (Verdict.AGREED, agreed),
        (Verdict.REJECTED, rejected),
        (Verdict.UNDECIDED, undecided),
    ):
        if group:
            Attempt.objects.filter(pk__in=[r.attempt_id for r in group]).update(
                verdict=verdict, verdict_at=now
            )
    if cancelled:
        state, counter = VerificationState.CANCELLED, "tasks_cancelled"
        detail = "the job was cancelled before the slice's replicas could be compared"
    elif canonical is None:
        state, counter = VerificationState.NO_QUORUM, "tasks_failed"
        detail = (
            f"no result reached a quorum of {verification.quorum} operators within "
            f"{len(tasks)} replicas: the results disagree"
        )
    else:
        state = VerificationState.AGREED
        result = agreed[0].result
        ok = result["failure"] == "" and result["exit_code"] == 0
        counter = "tasks_succeeded" if ok else "tasks_failed"
        detail = f"{len(agreed)} operators agreed, {len(rejected)} disagreed"
    Verification.objects.filter(pk=verification.pk).update(
        state=state, detail=detail, decided_at=now
    )
    event_append(
        stream=f"job:{verification.job_id}",
        type="SliceVerified",
        actor="system:verification",
        payload={
            "job_id": verification.job_id,
            "index": verification.index,
            "reason": verification.reason,
            "outcome": state,
            "quorum": verification.quorum,
            "result": agreed[0].result if agreed else None,
            "agreed": [r.attempt_id for r in agreed],
            "rejected": [r.attempt_id for r in rejected],
            "undecided": [r.attempt_id for r in undecided],
            "detail": detail,
        },
    )
    if not cancelled:
        transaction.on_commit(
            lambda: _trust_moves([r.node_id for r in agreed], [r.node_id for r in rejected])
        )
    # Cancelled tasks were counted when they were cancelled; the rest count now, as the verdict.
    uncounted = sum(1 for _, s, _ in tasks if s != TaskState.CANCELLED)
    if not uncounted:
        return None
    from jobs.attempts import job_count_finished

    return job_count_finished(
        verification.job_id, counter, now, by=uncounted, submitter_id=submitter_id
    )


def _submitter_pays(reason: str, paid: list[_Result]) -> set[int]:
    """Which paid results the submitter pays for (the rule, docs/economy.md): every one it asked
    for; of a spot-check, one, the node's own if it is among them, else the first checker's.
    The platform pays the rest."""
    if reason == VerificationReason.REQUESTED:
        return {r.attempt_id for r in paid}
    first = min(paid, key=lambda r: r.replica, default=None)
    return {first.attempt_id} if first is not None else set()


def _settle(r: _Result, verification: Verification, *, charge: bool, platform: bool) -> None:
    if charge and platform:
        settlement.spot_check_settle(
            attempt_id=r.attempt_id,
            job_id=verification.job_id,
            operator_id=r.operator_id,
            price_per_s_minor=r.price_per_s,
            runtime_ms=r.runtime_ms,
            timeout_ms=r.timeout_s * 1000,
            priced_at=r.leased_at,
            node_id=r.node_id,
        )
    else:
        billing.settle(attempt_id=r.attempt_id, runtime_ms=r.runtime_ms, charge=charge)


def _replica_add(job_id: int, index: int, reason: str, now: datetime, *, why: str) -> None:
    """One more replica of the slice, queued now (a spot-check's for trusted nodes only)."""
    job = Job.objects.get(pk=job_id)
    # The hold before the job's row (lock order: docs/architecture.md); the verdict has it.
    billing.holds_lock({job_id}, releasing_to=set())
    replica = (
        max(Task.objects.filter(job_id=job_id, index=index).values_list("replica", flat=True)) + 1
    )
    task = job.task(
        index, replica=replica, trusted_only=reason == VerificationReason.SPOT_CHECK, at=now
    )
    task.save()
    Job.objects.filter(pk=job_id).update(extra_tasks=F("extra_tasks") + 1)
    event_append(
        stream=f"job:{job_id}",
        type="ReplicaAdded",
        actor="system:verification",
        payload={
            "task_id": task.pk,
            "job_id": job_id,
            "index": index,
            "replica": replica,
            "reason": reason,
            "why": why,
        },
    )
    from jobs.wakeup import notify_work

    transaction.on_commit(notify_work)


# --- trust ---------------------------------------------------------------------------------------


def _trust_moves(agreed_nodes: list[int], rejected_nodes: list[int]) -> None:
    """After the verdict commits, in transactions of their own (each takes node rows, which a
    verdict must not while it holds the job's hold: docs/architecture.md, "Lock order"): each
    agreeing node has one more verified result; each rejected one a failure on its reliability,
    and quarantine once it has too many rejections in the window."""
    if agreed_nodes:
        Node.objects.filter(pk__in=agreed_nodes).update(verified_results=F("verified_results") + 1)
    now = timezone.now()
    for node_id in rejected_nodes:
        node_record_outcome(node_id=node_id, success=False, actor="system:verification", now=now)
        since = now - timedelta(hours=settings.JOB_REJECTION_WINDOW_H)
        rejections = Attempt.objects.filter(
            node_id=node_id, verdict=Verdict.REJECTED, verdict_at__gte=since
        ).count()
        if rejections >= settings.JOB_REJECTIONS_TO_QUARANTINE:
            node_quarantine(
                node=Node.objects.get(pk=node_id),
                rule=Rule.RESULTS,
                reason=(
                    f"{rejections} results disagreed with the result other operators' nodes "
                    f"agreed on, within {settings.JOB_REJECTION_WINDOW_H} h"
                ),
                actor="system:verification",
                now=now,
            )
