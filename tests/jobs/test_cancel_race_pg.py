"""A cancel beside a requeue, on PostgreSQL: the task of a cancelled job never runs again.

A reaper holds the lost attempt's row while it requeues the task; the cancel's flag waits on
that row, then finds the attempt lost and the task queued again after its own first pass over
the queued tasks: unless the cancel looks again, that task would run for a cancelled job. The
other way round, an infrastructure failure reported while the cancel is open must wait for
the cancel's flag instead of reading the attempt as it was, and end the task cancelled. And
when a claim takes the requeued task between two of the cancel's looks (no retry backoff), the
job's own flag tells the attempt to stop and ends it cancelled, however it ends.
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import cancellation, leases
from jobs.attempts import attempt_fail
from jobs.cancellation import job_cancel
from jobs.claim import task_claim
from jobs.models import Attempt, Job, Task
from jobs.node_profile import profile_for
from ledger.verify import verify_ledger
from nodes.models import Node
from tests.jobs.conftest import (
    CREDITS,
    beat,
    fund,
    held_open,
    online_node,
    submit_job,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def claimed(submitter, operator, slices: int):
    """A funded job of `slices` tasks, one of them claimed: (job, node, lease)."""
    fund(submitter, 1_000 * CREDITS)
    job = submit_job(submitter.pk, slices)
    node, _ = online_node(operator)
    lease = task_claim(profile=profile_for(Node.objects.get(pk=node.pk)))
    assert lease is not None
    return job, node, lease


def test_a_task_requeued_while_the_cancel_runs_is_cancelled_too(alice, bob):
    job, node, _ = claimed(alice, bob, 2)

    def reap(cursor) -> None:
        # What leases_reap does for this one attempt, held open until the cancel waits on it.
        lost = list(Attempt.objects.select_for_update().values_list("id", flat=True))
        leases._lose(lost, reason="lease_expired", now=timezone.now())

    with held_open(reap, "the cancel"):
        result = job_cancel(job=Job.objects.get(pk=job.pk), actor=f"user:{alice.pk}")
    assert result.queued_cancelled == 2 and result.job_state == "cancelled"
    assert sorted(Task.objects.values_list("state", flat=True)) == ["cancelled", "cancelled"]
    assert Attempt.objects.get().state == "lost"
    # Nothing is left for a claim, even once the requeue's backoff has passed.
    Task.objects.update(available_at=timezone.now() - timedelta(hours=1))
    assert task_claim(profile=profile_for(Node.objects.get(pk=node.pk))) is None
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_an_infrastructure_failure_beside_the_cancel_is_not_retried(alice, bob):
    job, node, lease = claimed(alice, bob, 1)

    def cancel(cursor) -> None:
        job_cancel(job=Job.objects.get(pk=job.pk), actor=f"user:{alice.pk}")

    # The failure is reported while the cancel, which has flagged the attempt, is still open:
    # it must wait for the flag, not read the attempt as it was before the cancel.
    with held_open(cancel, "the failure"):
        outcome = attempt_fail(
            attempt_id=lease.attempt_id,
            token=lease.lease_token,
            node_id=node.pk,
            failure_class="infra",
        )
    assert outcome.task_state == "cancelled" and outcome.job_state == "cancelled"
    assert Task.objects.get().state == "cancelled"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


@pytest.mark.parametrize("ending", ["infra failure", "lease lost"])
def test_a_claim_between_the_cancels_looks_is_stopped_and_ends_cancelled(
    alice, bob, settings, monkeypatch, ending
):
    settings.JOB_RETRY_BACKOFF_S = 0  # a requeued task can be claimed at once
    job, _, _ = claimed(alice, bob, 1)
    other, agent = online_node(bob)
    taken = []
    flag_running = cancellation._flag_running

    def flag_then_claim(job) -> int:
        # The cancel's flag has waited on the lost attempt, so the task is queued again: a
        # claim on another connection takes it and commits before the cancel looks again.
        flagged = flag_running(job)
        if not taken:

            def claim() -> None:
                try:
                    taken.append(task_claim(profile=profile_for(Node.objects.get(pk=other.pk))))
                finally:
                    connection.close()

            thread = threading.Thread(target=claim)
            thread.start()
            thread.join(15)
        return flagged

    monkeypatch.setattr(cancellation, "_flag_running", flag_then_claim)

    def reap(cursor) -> None:
        lost = list(Attempt.objects.select_for_update().values_list("id", flat=True))
        leases._lose(lost, reason="lease_expired", now=timezone.now())

    with held_open(reap, "the cancel"):
        result = job_cancel(job=Job.objects.get(pk=job.pk), actor=f"user:{alice.pk}")
    assert taken and taken[0] is not None, "the claim found nothing: no race was run"
    lease = taken[0]
    assert result.job_state == "running"  # the claimed task runs on, for now
    # The agent's next heartbeat tells it to stop that attempt.
    reply = beat(agent, leases=[lease.lease_token])
    assert reply.status_code == 200
    assert reply.json()["cancel"] == [lease.lease_token]
    if ending == "infra failure":
        outcome = attempt_fail(
            attempt_id=lease.attempt_id,
            token=lease.lease_token,
            node_id=other.pk,
            failure_class="infra",
        )
        assert outcome.task_state == "cancelled"
    else:
        Attempt.objects.filter(pk=lease.attempt_id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert leases.leases_reap() == 1
    assert Task.objects.get().state == "cancelled"
    assert Job.objects.get(pk=job.pk).state == "cancelled"
    Task.objects.update(available_at=timezone.now() - timedelta(hours=1))
    assert task_claim(profile=profile_for(Node.objects.get(pk=other.pk))) is None
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
