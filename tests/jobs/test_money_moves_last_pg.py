"""A completion moves the accounts it shares with other completions last, on PostgreSQL.

The operator's earnings (credited by every completion on that operator's nodes) and the
submitter's available credits (credited when any of their jobs ends) stay locked from their move
until the commit. A completion locks its job's hold first, counts and ends the job, and only then
posts the settlement and the release: while it waits on anything before that (here, its job's
row), it holds neither shared account, so the operator's other completions do not queue behind
it.
"""

import pytest
from django.db import transaction

from jobs.attempts import attempt_complete
from jobs.claim import task_claim
from jobs.models import Job
from jobs.node_profile import profile_for
from ledger.accounts import account_ensure, available_code, earnings_code, job_held_code
from ledger.models import Account, AccountKind, Event
from ledger.verify import verify_ledger
from nodes.models import Node
from tests.jobs.conftest import CREDITS, fund, held_open, online_node, submit_job

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_completion_waiting_on_its_job_holds_neither_shared_account(alice, bob):
    fund(alice, 1_000 * CREDITS)
    job = submit_job(alice.pk, 1)
    node, _ = online_node(bob)
    with transaction.atomic():  # as after the operator's first paid task
        account_ensure(code=earnings_code(bob.pk), kind=AccountKind.EARNINGS, owner_id=bob.pk)
    shared = sorted([earnings_code(bob.pk), available_code(alice.pk)])
    lease = task_claim(profile=profile_for(Node.objects.get(pk=node.pk)))
    held_before = Account.objects.get(code=job_held_code(job.pk)).balance
    available_before = Account.objects.get(code=available_code(alice.pk)).balance
    seen: dict[str, list[str]] = {}

    def lock_the_job(cursor) -> None:
        cursor.execute("SELECT 1 FROM jobs_job WHERE id = %s FOR UPDATE", [job.pk])

    def lock_the_shared_accounts(cursor) -> None:
        # While the completion waits on the job's row: NOWAIT fails at once on a row it holds.
        cursor.execute(
            "SELECT code FROM ledger_account WHERE code = ANY(%s) ORDER BY id FOR UPDATE NOWAIT",
            [shared],
        )
        seen["locked"] = sorted(row[0] for row in cursor.fetchall())

    with held_open(lock_the_job, "the completion", then=lock_the_shared_accounts):
        done = attempt_complete(
            attempt_id=lease.attempt_id, token=lease.lease_token, node_id=node.pk, exit_code=0
        )

    assert seen["locked"] == shared
    # The money still moved, whole: the charge to the operator and the platform, the rest back.
    assert done.job_state == "succeeded" and done.charged > 0
    assert Job.objects.get(pk=job.pk).state == "succeeded"
    assert Account.objects.get(code=job_held_code(job.pk)).balance == 0
    available = Account.objects.get(code=available_code(alice.pk)).balance
    assert available == available_before + held_before - done.charged
    types = list(
        Event.objects.filter(stream__in=[f"job:{job.pk}", f"hold:job:{job.pk}"])
        .order_by("id")
        .values_list("type", flat=True)
    )
    assert types[-2:] == ["JobFinished", "CreditsReleased"]
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
