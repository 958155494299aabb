"""A request's hold reads the submitter's credits without a lock and is checked under one: the
hold's own posting refuses a balance that another entry took in between, and nothing of the
request is left. Two real database connections, one of them holding the row."""

import threading

import pytest
from django.db import connection, transaction

from inference.billing import request_open
from inference.models import InferenceModel, InferenceRequest
from ledger.accounts import account_ensure, available_code
from ledger.errors import InsufficientFunds
from ledger.funding import credits_grant
from ledger.models import Account, AccountKind
from ledger.pricing import rules_at
from ledger.services import transfer
from ledger.verify import verify_ledger

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

# 10 prompt tokens at 1 minor unit and 20 completion tokens at 2: the hold is 50.
HOLD = {"prompt_bound": 10, "max_tokens": 20, "rate_in": 1_000_000, "rate_out": 2_000_000}


def _waiting_on_a_lock() -> list[str]:
    """The statements of this database's backends that wait for a lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return [row[0] for row in cursor.fetchall()]


def test_credits_taken_while_the_hold_is_written_refuse_it_whole(relay_world, alice, bob):
    credits_grant(user_id=alice.pk, amount=50, actor="test", reference="t", idempotency_key="g")
    model = InferenceModel.objects.get(name="tiny")
    book = rules_at().version
    taken, release = threading.Event(), threading.Event()

    def take_the_credits() -> None:
        # Another entry moves alice's credits and holds her row until told to commit.
        try:
            with transaction.atomic():
                transfer(
                    source=Account.objects.get(code=available_code(alice.pk)),
                    destination=account_ensure(
                        code=available_code(bob.pk), kind=AccountKind.AVAILABLE, owner_id=bob.pk
                    ),
                    amount=50,
                    actor="test",
                )
                taken.set()
                assert release.wait(30)
        finally:
            connection.close()

    other = threading.Thread(target=take_the_credits)
    other.start()
    assert taken.wait(30)
    outcome: list[BaseException | InferenceRequest] = []

    def hold() -> None:
        try:
            outcome.append(
                request_open(
                    submitter_id=alice.pk, model=model, kind="chat", book_version=book, **HOLD
                )
            )
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        # The hold read 50 available (the transfer is not committed), wrote the request and its
        # account, and waits for the row in its posting, not before its first write.
        for _ in range(300):
            if waiting := _waiting_on_a_lock():
                break
            holder.join(0.1)
        assert len(waiting) == 1 and "ledger_post(" in waiting[0], waiting
    finally:
        release.set()
        other.join(30)
        holder.join(30)

    assert len(outcome) == 1 and isinstance(outcome[0], InsufficientFunds), outcome
    assert "only 0.00 are available" in str(outcome[0])
    assert not InferenceRequest.objects.exists()
    assert not Account.objects.filter(code__startswith="inference:").exists()
    assert Account.objects.get(code=available_code(alice.pk)).balance == 0
    assert verify_ledger().ok
