import pytest
from django.db import transaction

from ledger.canonical import canonical_json, sha256_hex
from ledger.errors import IdempotencyConflict, ImmutableRecord, InvalidEvent, VersionConflict
from ledger.models import Event
from ledger.services import (
    NewEvent,
    _fingerprint,
    _fingerprint_around,
    event_append,
    events_append_bulk,
    events_insert_sql,
)
from tests.ledger.helpers import append

pytestmark = pytest.mark.django_db


def test_it_numbers_versions_per_stream():
    first = append("job:1")
    second = append("job:1")
    other = append("job:2")
    assert (first.version, second.version, other.version) == (1, 2, 1)


def test_it_refuses_a_stale_expected_version():
    append("job:1")
    append("job:1")
    with pytest.raises(VersionConflict, match="moved past version 1"):
        append("job:1", expected_version=1)
    assert Event.objects.filter(stream="job:1").count() == 2


def test_it_accepts_the_expected_version():
    append("job:1")
    assert append("job:1", expected_version=1).version == 2


def test_it_returns_the_original_event_for_a_replayed_key():
    original = append("job:1", memo="same", idempotency_key="k-1")
    again = append("job:1", memo="same", idempotency_key="k-1")
    assert again.pk == original.pk
    assert again.replayed and not original.replayed
    assert Event.objects.count() == 1


def test_it_refuses_a_key_reused_with_another_payload():
    append("job:1", memo="first", idempotency_key="k-1")
    with pytest.raises(IdempotencyConflict, match="different request"):
        append("job:1", memo="second", idempotency_key="k-1")
    assert Event.objects.count() == 1


@pytest.mark.parametrize("stream", ["topup:key-7", "key-7"])
def test_a_twin_that_got_in_first_is_an_idempotency_conflict(stream):
    """The race the look-up cannot see (`key_checked`: a twin committed after it): whichever
    unique index the database names, the key's or the version of a stream named after the
    key (every keyed event's stream is named after its key, or is new per request), the
    answer is an idempotency conflict."""
    append(stream, idempotency_key="key-7", expected_version=0)
    with pytest.raises(IdempotencyConflict, match="concurrent request"):
        append(stream, idempotency_key="key-7", expected_version=0, key_checked=True)
    # A version taken by another key's event is a version conflict, as before.
    with pytest.raises(VersionConflict):
        append(stream, idempotency_key="key-8", expected_version=0, key_checked=True)


def test_it_refuses_unknown_types_and_bad_payloads():
    with transaction.atomic(), pytest.raises(InvalidEvent, match="unknown event type"):
        event_append(stream="s", type="NoSuchThing", payload={}, actor="t")
    with transaction.atomic(), pytest.raises(InvalidEvent, match="postings") as info:
        event_append(
            stream="s",
            type="TransferPosted",
            actor="t",
            payload={"postings": "lots", "memo": "", "kind": "t"},
        )
    assert "postings" in info.value.fields
    with transaction.atomic(), pytest.raises(InvalidEvent, match="memo"):
        event_append(
            stream="s",
            type="TransferPosted",
            actor="t",
            payload={"postings": [["a", 1, "CRD"], ["b", -1, "CRD"]], "kind": "t"},
        )
    assert Event.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_it_must_be_called_inside_a_transaction():
    with pytest.raises(RuntimeError, match=r"transaction\.atomic"):
        event_append(
            stream="s",
            type="TransferPosted",
            actor="t",
            payload={"postings": [["a", 1, "CRD"], ["b", -1, "CRD"]], "memo": "", "kind": "t"},
        )


def test_the_model_refuses_updates_and_deletes():
    event = append("job:1")
    event.actor = "someone else"
    with pytest.raises(ImmutableRecord):
        event.save()
    with pytest.raises(ImmutableRecord):
        event.delete()
    with pytest.raises(ImmutableRecord):
        Event.objects.filter(pk=event.pk).update(actor="x")
    with pytest.raises(ImmutableRecord):
        Event.objects.all().delete()
    assert Event.objects.get(pk=event.pk).actor == "test"


@pytest.mark.parametrize(
    ("stream", "payload"),
    [
        ("node:7", {"from": "online", "to": "offline", "reason": "missed_heartbeats"}),
        ('transfer:ünï-"q"', {"memo": "naïve ☃ \\ \n", "postings": [["a", -1, "CRD"]]}),
        ("job:1", {"z": {"b": 1, "a": [1.5, None, True]}, "a": ""}),
    ],
)
def test_a_fingerprint_is_the_same_taken_whole_or_around_the_stream(stream, payload):
    before, after = _fingerprint_around("T", payload)
    assert sha256_hex(before + canonical_json(stream) + after) == _fingerprint(stream, "T", payload)


def test_bulk_events_carry_the_fingerprint_of_their_stream_type_and_payload():
    payload = {"from": "online", "to": "offline", "reason": "missed_heartbeats"}
    for count in (3, 600):  # 600: through COPY on PostgreSQL
        streams = [f"node:{count}-{i}" for i in range(count)]
        with transaction.atomic():
            events_append_bulk(
                [NewEvent(s, 1, "NodeStateChanged", payload, "test") for s in streams]
            )
        rows = Event.objects.filter(stream__in=streams).values_list("stream", "fingerprint")
        assert len(rows) == count
        for stream, fingerprint in rows:
            assert fingerprint == _fingerprint(stream, "NodeStateChanged", payload)


def test_the_sql_append_refuses_a_stream_prefix_that_json_would_escape():
    with pytest.raises(ValueError, match="escaping"):
        events_insert_sql(
            source="moved", type="NodeStateChanged", payloads={}, stream_prefix='no"de:', actor="t"
        )
