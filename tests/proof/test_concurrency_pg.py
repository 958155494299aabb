"""64 concurrent claimers on PostgreSQL, each a process with its own connection and node, over
PROOF_TASKS tasks: zero double leases, zero lost tasks, zero double settlements, books that
balance to the minor unit.

Processes, not threads: threads in one interpreter take turns, and the claim's race would be
tested at the speed of the GIL. Four nodes of the 64 are "late" (they sit on leases past their
expiry and report anyway) and a reaper process returns expired leases as beat does; honest
nodes fail some attempts, complete some twice and present some leases as another node.

The default size fits CI's time on a 2-core machine; the full proof is
    PROOF_TASKS=20000 pytest tests/proof/test_concurrency_pg.py
(docs/security.md, appendix, has the figures measured here).
"""

import multiprocessing
import os
import queue as queue_module
import time
from collections import Counter

import pytest
from django.db import connection, connections

from jobs.cancellation import job_cancel
from jobs.models import Attempt, Job, Task
from ledger.accounts import available_code
from ledger.models import Account, Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import CREDITS, fund, online_node, submit_job
from tests.proof import claimers

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TASKS = int(os.environ.get("PROOF_TASKS", "4000"))
CLAIMERS = int(os.environ.get("PROOF_CLAIMERS", "64"))
LATE = 4
DEADLINE_S = float(os.environ.get("PROOF_DEADLINE_S", str(max(240, TASKS // 10))))
# Many small jobs and one operator per node, as a pool has them: completions of one job queue on
# its hold and its counters, and settlements of one operator on their earnings row, by design.
SLICES_PER_JOB = int(os.environ.get("PROOF_SLICES_PER_JOB", "10"))
FUNDS = 10**9 * CREDITS
# The children's settings: no retry backoff (a requeued task is claimable at once, so the run is
# short) and no price cache shared across processes.
OVERRIDES = {"JOB_RETRY_BACKOFF_S": 0}


def connection_headroom() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int"
            " - (SELECT count(*) FROM pg_stat_activity)"
        )
        return cursor.fetchone()[0]


def wait_for_headroom(needed: int, timeout: float = 120) -> None:
    """Other suites on this machine hold connections too: wait (bounded) for enough."""
    deadline = time.monotonic() + timeout
    while (free := connection_headroom()) < needed:
        if time.monotonic() > deadline:
            pytest.fail(f"PostgreSQL has {free} free connections; this proof needs {needed}")
        time.sleep(1)


def run_fleet(nodes: list, deadline_s: float) -> list[claimers.Tally]:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    deadline = time.monotonic() + deadline_s
    # Children must not inherit an open connection: each opens its own.
    connections.close_all()
    processes = [
        context.Process(
            name=claimers.claimer_name(node.pk, i < LATE),
            target=claimers.claimer,
            kwargs={
                "node_id": node.pk,
                "other_node_id": nodes[(i + 1) % len(nodes)].pk,
                "late": i < LATE,
                "seed": i,
                "deadline": deadline,
                "overrides": OVERRIDES,
                "queue": results,
            },
        )
        for i, node in enumerate(nodes)
    ]
    processes.append(
        context.Process(
            name="reaper",
            target=claimers.reaper,
            kwargs={"deadline": deadline, "overrides": OVERRIDES, "queue": results},
        )
    )
    for process in processes:
        process.start()
    tallies = []
    try:
        for _ in processes:
            remaining = deadline - time.monotonic() + 30
            tallies.append(results.get(timeout=max(remaining, 1)))
    except queue_module.Empty:
        reported = {tally.name for tally in tallies}
        silent = [
            f"{p.name} (pid {p.pid}, {'running' if p.is_alive() else p.exitcode})"
            for p in processes
            if p.name not in reported
        ]
        pytest.fail(
            f"only {len(tallies)} of {len(processes)} processes reported in time; silent: "
            + ", ".join(silent)
            + " (a stuck one printed its stacks to stderr, below)"
        )
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(5)
    return tallies


@pytest.mark.timeout(int(DEADLINE_S) + 300)
def test_it_leases_runs_and_settles_every_task_exactly_once(alice, capsys):
    from people.services import user_create

    fund(alice, FUNDS)
    jobs = [
        submit_job(alice.pk, min(SLICES_PER_JOB, TASKS - start))
        for start in range(0, TASKS, SLICES_PER_JOB)
    ]
    doomed = submit_job(alice.pk, 50)  # cancelled before anyone may run it
    job_cancel(job=doomed, actor="test")
    operators = [user_create(username=f"op-{i}", roles=["operator"]) for i in range(CLAIMERS)]
    nodes = [online_node(op, name=f"rig-{i}")[0] for i, op in enumerate(operators)]
    wait_for_headroom(CLAIMERS + 4)

    started = time.monotonic()
    tallies = run_fleet(nodes, DEADLINE_S)
    elapsed = time.monotonic() - started
    errors = [f"{t.name}: {e}" for t in tallies for e in t.errors]
    assert not errors, "\n".join(errors[:5])
    counts = sum((t.counts for t in tallies), Counter())

    tasks = Task.objects.filter(job__in=jobs)
    assert tasks.count() == TASKS
    # No task lost: every one ended, and its job with it.
    states = Counter(tasks.values_list("state", flat=True))
    assert set(states) <= {"succeeded", "failed"}, states
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        assert job.state in ("succeeded", "failed"), job
        assert job.tasks_succeeded + job.tasks_failed == job.slices
    assert not Attempt.objects.filter(state__in=["leased", "running"]).exists()
    assert not Attempt.objects.filter(task__job=doomed).exists()
    assert Job.objects.get(pk=doomed.pk).state == "cancelled"

    # No double lease: one attempt per (task, number), and each attempt of a task began only
    # after the one before it had ended.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FROM (
                SELECT leased_at, number,
                       lag(finished_at) OVER w AS previous_end,
                       lag(number) OVER w AS previous_number
                  FROM jobs_attempt WINDOW w AS (PARTITION BY task_id ORDER BY number)
            ) a
             WHERE previous_number IS NOT NULL
               AND (previous_end IS NULL OR leased_at < previous_end
                    OR number <> previous_number + 1)
            """
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT count(*) FROM jobs_task t WHERE t.attempts <> "
            "(SELECT count(*) FROM jobs_attempt a WHERE a.task_id = t.id)"
        )
        assert cursor.fetchone()[0] == 0

    # One success per succeeded task, none for a failed one.
    successes = Counter(
        Event.objects.filter(type="AttemptSucceeded").values_list("payload__task_id", flat=True)
    )
    assert set(successes.values()) == {1}
    assert len(successes) == states["succeeded"]
    assert set(successes) == set(tasks.filter(state="succeeded").values_list("id", flat=True))
    winners = Counter(Attempt.objects.filter(state="succeeded").values_list("task_id", flat=True))
    assert set(winners.values()) == {1} and len(winners) == states["succeeded"]

    # No double settlement: every attempt settled exactly once; a fenced or lost one paid 0.
    settled = Counter(
        Event.objects.filter(type="AttemptSettled").values_list("payload__attempt_id", flat=True)
    )
    assert set(settled.values()) == {1}
    assert len(settled) == Attempt.objects.count()
    charged = dict(
        Event.objects.filter(type="AttemptSettled").values_list(
            "payload__attempt_id", "payload__charged_minor"
        )
    )
    unpaid = Attempt.objects.filter(state="lost") | Attempt.objects.filter(failure_class="infra")
    assert all(charged[a] == 0 for a in unpaid.values_list("id", flat=True))

    # The books: every hold released, and what alice no longer has is exactly what was charged.
    held = Account.objects.filter(kind="held").exclude(balance=0)
    assert not held.exists(), list(held.values_list("code", "balance")[:5])
    available = Account.objects.get(code=available_code(alice.pk)).balance
    assert FUNDS - available == sum(charged.values())
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems[:5]

    # The faults really happened, and were fenced.
    lost = Attempt.objects.filter(state="lost").count()
    assert counts["stale_late_report"] > 0 and lost >= counts["stale_late_report"]
    assert counts["stale_duplicate"] > 0 and counts["stale_foreign_node"] > 0
    # Lost: reaped by the reaper, or reclaimed when failures quarantined the node.
    assert counts["failed_infra"] > 0 and counts["reaped"] > 0
    with capsys.disabled():
        print(
            f"\n  concurrency proof: {TASKS} tasks, {CLAIMERS} claimer processes, "
            f"{Attempt.objects.count()} attempts in {elapsed:.1f} s "
            f"({TASKS / elapsed:.0f} tasks/s); {dict(states)}; fenced: "
            f"{counts['stale_duplicate']} duplicate, {counts['stale_foreign_node']} foreign, "
            f"{counts['stale_late_report']} late; {lost} leases reaped"
        )
