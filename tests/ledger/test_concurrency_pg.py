"""Two real connections racing on PostgreSQL."""

import pytest
from django.db import transaction

from core.errors import ConflictError
from ledger.errors import VersionConflict
from ledger.models import Event
from tests.ledger.helpers import append, race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_writers_at_one_version_exactly_one_wins():
    append("job:7")
    results = race(2, lambda i: append("job:7", memo=f"writer {i}", expected_version=1))
    winners = [r for r in results if isinstance(r, Event)]
    losers = [r for r in results if isinstance(r, VersionConflict)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert Event.objects.filter(stream="job:7").count() == 2


def test_eight_writers_without_expected_version_never_share_a_version():
    results = race(8, lambda i: append("job:8", memo=f"writer {i}"))
    versions = sorted(Event.objects.filter(stream="job:8").values_list("version", flat=True))
    assert versions == list(range(1, len(versions) + 1))
    assert len(versions) + sum(isinstance(r, ConflictError) for r in results) == 8


def test_concurrent_requests_with_one_key_write_one_event():
    def work(i: int) -> Event:
        try:
            return append("job:9", memo="same", idempotency_key="pay-1")
        except ConflictError:
            # The loser of the race retries, as a client would, and gets the original.
            return append("job:9", memo="same", idempotency_key="pay-1")

    results = race(4, work)
    assert all(isinstance(r, Event) for r in results), results
    assert len({r.pk for r in results}) == 1
    assert Event.objects.filter(idempotency_key="pay-1").count() == 1


def test_the_trigger_stamps_the_writing_transaction():
    with transaction.atomic():
        first = append("job:10")
        second = append("job:10")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.txid is not None and first.txid == second.txid
    third = append("job:10")
    third.refresh_from_db()
    assert third.txid > first.txid
