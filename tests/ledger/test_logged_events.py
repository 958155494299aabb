"""ledger.projections.logged_events: verify_ledger's pass reads each event with a plain cursor,
not the ORM; what it yields must be what the ORM reads."""

from datetime import timedelta

import pytest
from django.db import transaction

from ledger.chain import chain_seal
from ledger.models import Event, EventSeal
from ledger.projections import LoggedEvent, logged_events
from tests.ledger.helpers import append


def _orm_events() -> list[LoggedEvent]:
    return [
        LoggedEvent._make(row)
        for row in Event.objects.order_by("id").values_list(*LoggedEvent._fields)
    ]


@pytest.mark.django_db(transaction=True)
def test_it_yields_what_the_orm_reads_with_the_seals_asked_for():
    append("job:1", memo="plain")
    append("job:1", memo='ünïcödé, "quoted" and \\ back-slashed', idempotency_key="k-1")
    chain_seal()
    append("job:2", memo="not sealed yet")
    expected = _orm_events()
    seals = dict(EventSeal.objects.values_list("event_id", "seq"))
    hashes = dict(EventSeal.objects.values_list("event_id", "hash"))
    assert len(seals) == len(expected) - 1  # the last one is not sealed

    # Outside a transaction (autocommit), as chain_verify reads it.
    sealed = list(logged_events(with_seals=True))
    assert [event for event, _, _ in sealed] == expected
    assert [(seq, stored) for _, seq, stored in sealed] == [
        (seals.get(event.id), hashes.get(event.id)) for event in expected
    ]
    assert sealed[-1][1:] == (None, None)

    with transaction.atomic():  # inside one, as verify_ledger reads it
        bare = list(logged_events())
    assert [event for event, _, _ in bare] == expected
    assert {(seq, stored) for _, seq, stored in bare} == {(None, None)}

    for (event, _, _), orm in zip(bare, expected, strict=True):
        assert event.recorded_at.utcoffset() == timedelta(0)
        assert event.recorded_at.isoformat() == orm.recorded_at.isoformat()
    assert bare[1][0].payload == {"memo": 'ünïcödé, "quoted" and \\ back-slashed'}
    assert bare[1][0].idempotency_key == "k-1"


@pytest.mark.django_db
def test_it_reads_in_chunks_across_a_boundary(monkeypatch):
    monkeypatch.setattr("ledger.projections.READ_CHUNK", 2)
    for i in range(5):
        append(f"job:{i}", memo=str(i))
    assert [event for event, _, _ in logged_events()] == _orm_events()
