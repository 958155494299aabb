"""A job's last completion beside a cancel of its other tasks, on PostgreSQL.

The cancel marks the running attempt, appends JobCancelRequested and counts its tasks on the
job's row, in one transaction; the completion waits behind it (the attempt's row first). Once
it goes on, it must count the cancelled task, end the job cancelled and append JobFinished
after the cancel's event, every lock wait notwithstanding.
"""

import pytest

from jobs.attempts import attempt_complete
from jobs.cancellation import job_cancel
from jobs.claim import task_claim
from jobs.models import Job
from jobs.node_profile import profile_for
from ledger.models import Event
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


def test_the_last_completion_waits_for_a_cancel_and_finishes_the_job_after_it(alice, bob):
    fund(alice, 1_000 * CREDITS)
    job = submit_job(alice.pk, 2)
    node, _ = online_node(bob)
    lease = task_claim(profile=profile_for(Node.objects.get(pk=node.pk)))

    def cancel(cursor) -> None:
        job_cancel(job=Job.objects.get(pk=job.pk), actor="user:alice")

    # The cancel's locks are held until the completion waits behind them.
    with held_open(cancel, "the completion"):
        token = lease.lease_token
        done = attempt_complete(
            attempt_id=lease.attempt_id, token=token, node_id=node.pk, exit_code=0
        )
    assert done.job_state == "cancelled"
    job.refresh_from_db()
    assert (job.state, job.tasks_succeeded, job.tasks_cancelled) == ("cancelled", 1, 1)
    stream = [e.type for e in Event.objects.filter(stream=f"job:{job.pk}").order_by("version")]
    assert stream[-2:] == ["JobCancelRequested", "JobFinished"]
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
