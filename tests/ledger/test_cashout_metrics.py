"""Cashouts in /metrics: those waiting on finance read from the database, each move counted
once it commits."""

import pytest

from ledger.cashouts import cashout_mark_paid, cashout_reject
from tests.core.scraping import scrape, value
from tests.ledger.economy_helpers import approved_cashout, earn, request_cashout

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("price_books")]

MIN = 5_000_000  # ₹500 at 1 paisa per credit, in minor units


def test_open_cashouts_are_read_and_every_move_is_counted(
    client, alice, bob, django_capture_on_commit_callbacks
):
    earn(alice, bob, 4 * MIN)
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        waiting = request_cashout(bob, MIN)
        approved = approved_cashout(bob, MIN + 100)
        rejected = request_cashout(bob, MIN + 200)
        cashout_reject(cashout_id=rejected.pk, reason="wrong account", actor="user:finance")
    found = scrape(client)
    assert value(found, "computepool_cashouts_open", status="requested") == 1
    assert value(found, "computepool_cashouts_open", status="approved") == 1
    assert (
        value(found, "computepool_cashouts_open_minor", status="requested") == waiting.amount_minor
    )
    assert (
        value(found, "computepool_cashouts_open_minor", status="approved") == approved.amount_minor
    )

    def moved(status: str) -> float:
        return value(found, "computepool_cashouts_total", status=status) - value(
            before, "computepool_cashouts_total", status=status
        )

    assert (moved("requested"), moved("approved"), moved("rejected"), moved("paid")) == (3, 1, 1, 0)
    with django_capture_on_commit_callbacks(execute=True):
        cashout_mark_paid(cashout_id=approved.pk, payout_reference="UTR-1", actor="user:finance")
    found = scrape(client)
    assert moved("paid") == 1
    assert value(found, "computepool_cashouts_open", status="approved") == 0


def test_a_cashout_that_rolls_back_is_not_counted(client, alice, bob):
    # A test's transaction never commits: the request stands in it, its count waits for a
    # commit that never comes.
    earn(alice, bob, 2 * MIN)
    before = scrape(client)
    request_cashout(bob, MIN)
    after = scrape(client)
    assert value(after, "computepool_cashouts_open", status="requested") == 1
    requested = {"status": "requested"}
    assert value(after, "computepool_cashouts_total", **requested) == value(
        before, "computepool_cashouts_total", **requested
    )
