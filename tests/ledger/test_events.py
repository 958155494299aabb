import json

import pytest
from django.db import connection, transaction

from ledger.errors import IdempotencyConflict, ImmutableRecord, InvalidEvent, VersionConflict
from ledger.models import Event
from ledger.registry import register
from ledger.services import NewEvent, event_append, events_append_bulk
from tests.ledger.helpers import append, fingerprint

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
def test_an_event_under_a_key_carries_the_logs_fingerprint_of_its_request(stream, payload):
    register("TestAnything", properties={}, additional=True)
    with transaction.atomic():
        event = event_append(
            stream=stream, type="TestAnything", payload=payload, actor="t", idempotency_key="k"
        )
    stored = Event.objects.get(pk=event.pk)
    assert stored.fingerprint == event.fingerprint == fingerprint(stream, "TestAnything", payload)
    assert stored.payload == payload and stored.txid is not None
    # Stream, type and payload each count.
    others = {
        fingerprint(stream + "x", "TestAnything", payload),
        fingerprint(stream, "TestAnythingx", payload),
        fingerprint(stream, "TestAnything", {**payload, "extra": 1}),
    }
    assert event.fingerprint not in others and len(others) == 3


@pytest.mark.parametrize(
    ("stream", "type_", "payload"),
    [
        ("node:7", "NodeStateChanged", {"from": "online", "to": "offline"}),
        ('t:"q"\\ \n\t\u0001 ünï ☃ 𝄞', 'T"y\\pe', {'k"ey': "v?"}),
        ("j:1", "T", {"b": [1.50, -0.0, 1e300, None, True, {}], "a": {"": ""}, "ab": "\u007f"}),
        ("", "", {}),
    ],
)
def test_the_fingerprint_hashes_the_jsonb_text_of_stream_type_and_payload(stream, type_, payload):
    # Every fingerprint ever written is the hash of this text: the rule may be written another
    # way, never changed.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT encode(sha256(convert_to(jsonb_build_array(%s::text, %s::text, %s::jsonb)"
            "::text, 'UTF8')), 'hex')",
            [stream, type_, json.dumps(payload)],
        )
        (expected,) = cursor.fetchone()
    assert fingerprint(stream, type_, payload) == expected


def test_a_replayed_key_is_told_from_a_reuse_by_stream_and_payload():
    append("job:1", memo="same", idempotency_key="k-1")
    with pytest.raises(IdempotencyConflict, match="different request"):
        append("job:2", memo="same", idempotency_key="k-1")
    assert Event.objects.count() == 1


def test_an_event_without_a_key_has_no_fingerprint():
    # Nothing can replay it, so nothing would read one.
    with transaction.atomic():
        event = event_append(stream="job:1", type="TestNoted", payload={"memo": "x"}, actor="t")
    assert event.fingerprint is None
    assert Event.objects.get(pk=event.pk).fingerprint is None


def test_bulk_events_under_keys_carry_the_fingerprint_of_their_stream_type_and_payload():
    payload = {"from": "online", "to": "offline", "reason": "missed_heartbeats"}
    for count in (3, 600):
        streams = [f"node:{count}-{i}" for i in range(count)]
        # Every other event under a key: a batch's keyed events have one, the others none.
        keys = [f"key:{s}" if i % 2 else None for i, s in enumerate(streams)]
        with transaction.atomic():
            appended = events_append_bulk(
                [
                    NewEvent(s, "NodeStateChanged", payload, "test", 0, k)
                    for s, k in zip(streams, keys, strict=True)
                ]
            )
        assert [a.version for a in appended] == [1] * count
        rows = dict(Event.objects.filter(stream__in=streams).values_list("stream", "fingerprint"))
        assert len(rows) == count
        assert [a.fingerprint for a in appended] == [rows[s] for s in streams]
        for stream, key in list(zip(streams, keys, strict=True))[:6]:
            expected = fingerprint(stream, "NodeStateChanged", payload) if key else None
            assert rows[stream] == expected


def _noted(stream, memo="x", expected=None, key=None):
    return NewEvent(stream, "TestNoted", {"memo": memo}, "test", expected, key)


def test_the_door_numbers_several_events_of_a_stream_in_one_call():
    append("job:1")
    with transaction.atomic():
        appended = events_append_bulk(
            [
                _noted("job:1"),
                _noted("job:2"),
                _noted("job:1"),
                _noted("job:3", expected=0),
                _noted("job:3", expected=1),
                _noted("job:2"),
            ]
        )
    assert [a.version for a in appended] == [2, 1, 3, 1, 2, 2]
    assert appended == sorted(appended, key=lambda a: a.id)
    versions = Event.objects.order_by("id").values_list("stream", "version", "payload")
    assert [v[:2] for v in versions] == [
        ("job:1", 1), ("job:1", 2), ("job:2", 1), ("job:1", 3), ("job:3", 1), ("job:3", 2),
        ("job:2", 2),
    ]  # fmt: skip


def test_a_batch_whose_events_all_name_their_version_takes_the_next_of_each():
    append("job:1")
    with transaction.atomic():
        appended = events_append_bulk(
            [_noted("job:1", expected=1), _noted("job:2", expected=0), _noted("job:1", expected=2)]
        )
    assert [a.version for a in appended] == [2, 1, 3]
    assert appended == sorted(appended, key=lambda a: a.id)


def test_two_events_of_a_stream_naming_one_version_fail_the_whole_call():
    append("job:1")
    with pytest.raises(VersionConflict), transaction.atomic():
        events_append_bulk([_noted("job:1", expected=1), _noted("job:1", expected=1)])
    with pytest.raises(VersionConflict), transaction.atomic():
        events_append_bulk(
            [_noted("job:2"), _noted("job:1", expected=1), _noted("job:1", expected=1)]
        )
    assert Event.objects.count() == 1


def test_a_stale_expected_version_fails_the_whole_call():
    append("job:1")
    with pytest.raises(VersionConflict, match="batch"), transaction.atomic():
        events_append_bulk([_noted("job:2", expected=0), _noted("job:1", expected=0)])
    assert Event.objects.count() == 1


def test_a_key_taken_fails_the_whole_call_as_an_idempotency_conflict():
    append("topup:k-9", idempotency_key="k-9", expected_version=0)
    with pytest.raises(IdempotencyConflict, match="concurrent"), transaction.atomic():
        events_append_bulk([_noted("job:2"), _noted("other", key="k-9")])
    assert Event.objects.count() == 1


def test_a_bulk_call_must_be_inside_a_transaction_and_validates_every_payload():
    with pytest.raises(InvalidEvent), transaction.atomic():
        events_append_bulk([_noted("job:1"), NewEvent("job:1", "TestNoted", {}, "t")])
    assert Event.objects.count() == 0
