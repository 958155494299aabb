"""Twin requests with one idempotency key, the second arriving while the first is in flight.

docs/security.md: an identical repeat returns the original. The window is held open from the
test: its own transaction holds the row that every grant to alice moves (her available
credits), so all sixteen requests are in flight at once, past their lookup of the key, before
the first can commit."""

import threading
import time

import pytest
from django.db import connection, transaction

from ledger.accounts import available_code
from ledger.models import Account, Entry, Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import fund

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("price_books")]

TWINS = 16


def _waiting_on_locks(cursor) -> int:
    # Inside a transaction the activity view is a snapshot taken at its first read: renew it.
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    return cursor.fetchone()[0]


def test_sixteen_identical_grants_in_flight_at_once_all_return_the_original(
    api, alice, carol, transactional_db
):
    fund(alice, 1)  # her account exists, so every grant waits on its row below
    finance = api(carol, "finance")
    body = {"user_id": alice.pk, "amount_minor": 5_000, "reference": "r", "idempotency_key": "k"}
    answers: list[tuple[int, dict]] = []
    start = threading.Barrier(TWINS)

    def grant() -> None:
        start.wait(10)
        response = finance.post("/api/v1/credits/grants", body, format="json")
        answers.append((response.status_code, response.json()))
        connection.close()

    twins = [threading.Thread(target=grant) for _ in range(TWINS)]
    with transaction.atomic(), connection.cursor() as cursor:
        Account.objects.select_for_update().get(code=available_code(alice.pk))
        for twin in twins:
            twin.start()
        deadline = time.monotonic() + 30
        while _waiting_on_locks(cursor) < TWINS:
            assert time.monotonic() < deadline, "the grants never all waited"
            time.sleep(0.05)
    for twin in twins:
        twin.join(30)

    refused = [answer for code, answer in answers if code != 201]
    assert not refused, f"{len(refused)} of {TWINS} refused: {refused[0]}"
    assert len({answer["entry_id"] for _, answer in answers}) == 1
    assert Event.objects.filter(idempotency_key="grant:k").count() == 1
    assert Entry.objects.filter(event__idempotency_key="grant:k").count() == 1
    assert verify_ledger().ok
