"""The lease reaper's batches against a completion in flight, on PostgreSQL: lock order.

A reaper batch settles lost attempts of many jobs in one transaction. A completion takes its
job's hold and then, when it finishes the job, the submitter's account. A batch that took the
holds one job at a time could hold that account (released by a job it had just finished) while
waiting for the completing job's hold: a deadlock, which PostgreSQL breaks by failing one side.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.claim import task_claim
from jobs.leases import leases_reap
from jobs.models import Attempt, Job, Task
from jobs.node_profile import profile_for
from ledger.accounts import available_code, job_held_code
from ledger.models import Account
from ledger.verify import verify_ledger
from nodes.models import Node
from tests.jobs.conftest import (
    CREDITS,
    fund,
    held_open,
    online_node,
    submit_job,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def reap_beside_a_completion(hold_code: str, then_sql: str, then_params: list) -> int:
    """`leases_reap()` while another connection does what a completion does, in its order:
    lock a job's hold, wait until the reaper waits behind it, then `then_sql`. Returns what the
    reaper reaped, once the completion has committed (a deadlock fails one side)."""

    def lock_hold(cursor) -> None:
        cursor.execute("SELECT id FROM ledger_account WHERE code = %s FOR UPDATE", [hold_code])

    # The reaper waits behind the hold; then the completion goes on, in its order.
    with held_open(
        lock_hold, "the reaper", then=lambda cursor: cursor.execute(then_sql, then_params)
    ):
        reaped = leases_reap()
    return reaped


def test_a_reaper_batch_waits_for_a_completion_of_another_job_without_deadlock(alice, bob):
    fund(alice, 1_000 * CREDITS)
    ending, completing = submit_job(alice.pk, 1), submit_job(alice.pk, 1)
    # Losing its only allowed attempt fails `ending`'s task and ends the job, which releases
    # its hold to alice's account: the shared row.
    Task.objects.filter(job=ending).update(max_attempts=1)
    node, _ = online_node(bob)
    profile = profile_for(Node.objects.get(pk=node.pk))
    assert task_claim(profile=profile) and task_claim(profile=profile)
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    # What `completing`'s last completion does: its hold, then alice's account.
    reaped = reap_beside_a_completion(
        job_held_code(completing.pk),
        "SELECT id FROM ledger_account WHERE code = %s FOR UPDATE",
        [available_code(alice.pk)],
    )
    assert reaped == 2
    assert Job.objects.get(pk=ending.pk).state == "failed"
    assert Task.objects.get(job=completing).state == "queued"
    assert Account.objects.get(code=job_held_code(ending.pk)).balance == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_reaper_batch_takes_no_job_row_before_the_holds(alice, bob):
    """A lost attempt's job row is not locked with its task: a completion of another task of
    that job holds the job's hold and then updates the job row; a batch holding that row while
    it waits for the hold would deadlock with it."""
    fund(alice, 1_000 * CREDITS)
    job = submit_job(alice.pk, 2)
    node, _ = online_node(bob)
    profile = profile_for(Node.objects.get(pk=node.pk))
    lost, running = task_claim(profile=profile), task_claim(profile=profile)
    Attempt.objects.filter(pk=lost.attempt_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # What the other task's completion does: its settlement's hold, then its job counter.
    reaped = reap_beside_a_completion(
        job_held_code(job.pk),
        "UPDATE jobs_job SET tasks_succeeded = tasks_succeeded WHERE id = %s",
        [job.pk],
    )
    assert reaped == 1
    assert Attempt.objects.get(pk=running.attempt_id).state == "leased"
    assert Task.objects.get(current_attempt_id=None, job=job).state == "queued"
