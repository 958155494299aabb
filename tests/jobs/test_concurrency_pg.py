"""Real concurrent claimers on PostgreSQL: 32 threads, each its own node and connection."""

import random
import threading
from collections import Counter

import pytest
from django.db import connection

from jobs.attempts import attempt_complete, attempt_fail
from jobs.cancellation import job_cancel
from jobs.claim import task_claim
from jobs.errors import StaleLease
from jobs.leases import leases_reap
from jobs.models import Attempt, Job, Task
from jobs.node_profile import profile_for
from jobs.size_class import node_size_classes
from ledger.models import Event
from ledger.verify import verify_ledger
from nodes.models import Node
from tests.jobs.conftest import CREDITS, fund, online_node, submit_job
from tests.nodes.conftest import BASE

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLAIMERS = 32
JOBS, SLICES = 20, 100  # 2,000 tasks


def test_32_claimers_lease_every_task_exactly_once(alice, bob):
    fund(alice, 100_000_000 * CREDITS)
    jobs = [submit_job(alice.pk, SLICES) for _ in range(JOBS)]
    # Half the claimers are small CPU nodes, which pick through the queue's size classes; the
    # other half pick through the queue's own index: both kinds race for the same heads.
    small = {"gpus": [], "cpu": {**BASE["cpu"], "logical_cores": 2}, "ram_mb": 2048}
    nodes = [
        online_node(bob, name=f"rig-{i}", **(small if i % 2 else {}))[0] for i in range(CLAIMERS)
    ]
    assert (
        sum(node_size_classes(n.cpu_cores, n.ram_mb, n.gpu_count) is not None for n in nodes)
        == CLAIMERS // 2
    )
    doomed = submit_job(alice.pk, 50)  # cancelled before anyone may run it
    job_cancel(job=doomed, actor="test")
    stale_rejected = Counter()
    errors: list[BaseException] = []
    barrier = threading.Barrier(CLAIMERS + 1)

    def work(node: Node, seed: int) -> None:
        rng = random.Random(seed)
        profile = profile_for(Node.objects.get(pk=node.pk))
        try:
            barrier.wait(30)
            while True:
                lease = task_claim(profile=profile)
                if lease is None:
                    if not Task.objects.filter(state__in=["queued", "leased"]).exists():
                        return
                    continue
                roll = rng.random()
                if roll < 0.03:  # an infrastructure failure: retried on another node
                    attempt_fail(
                        attempt_id=lease.attempt_id,
                        token=lease.lease_token,
                        node_id=node.pk,
                        failure_class="infra",
                    )
                    continue
                attempt_complete(
                    attempt_id=lease.attempt_id,
                    token=lease.lease_token,
                    node_id=node.pk,
                    exit_code=0,
                )
                if roll > 0.97:  # a duplicate completion: must be fenced
                    try:
                        attempt_complete(
                            attempt_id=lease.attempt_id,
                            token=lease.lease_token,
                            node_id=node.pk,
                            exit_code=0,
                        )
                    except StaleLease:
                        stale_rejected["twice"] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    def reaper() -> None:
        try:
            barrier.wait(30)
            while any(t.is_alive() for t in threads):
                leases_reap()
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(n, i)) for i, n in enumerate(nodes)]
    for thread in threads:
        thread.start()
    reap = threading.Thread(target=reaper)
    reap.start()
    for thread in threads:
        thread.join(300)
    reap.join(30)
    assert not errors, errors[:3]

    tasks = Task.objects.filter(job__in=jobs)
    assert tasks.count() == JOBS * SLICES
    # None lost: every task ended; infra failures past max_attempts may fail a task.
    states = Counter(tasks.values_list("state", flat=True))
    assert set(states) <= {"succeeded", "failed"}, states
    # Exactly one success per succeeded task, one settlement per attempt, no double lease.
    successes = Counter(
        Event.objects.filter(type="AttemptSucceeded").values_list("payload__task_id", flat=True)
    )
    assert all(n == 1 for n in successes.values())
    assert len(successes) == states["succeeded"]
    settled = Counter(
        Event.objects.filter(type="AttemptSettled").values_list("payload__attempt_id", flat=True)
    )
    finished = Attempt.objects.exclude(state__in=["leased", "running"]).count()
    assert all(n == 1 for n in settled.values()) and len(settled) == finished
    claims = Counter(Attempt.objects.values_list("task_id", "number"))
    assert all(n == 1 for n in claims.values())
    assert stale_rejected["twice"] > 0
    # The cancelled job's tasks were never handed out.
    assert not Attempt.objects.filter(task__job=doomed).exists()
    assert Job.objects.get(pk=doomed.pk).state == "cancelled"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems[:5]
