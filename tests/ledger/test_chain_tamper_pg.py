"""Every tamper with the chain that verify must name. The check reads the log once, in id order,
each event with its seal; the chain is defined in seal order. Each tamper is checked against a
walk of the seals in seq order, each against the previous stored hash, then the batches' heads
and signatures: the same lines, in the same order. A tamper that recomputes the chain as well
is left to the signatures (tests/ledger/test_seal_signing_pg.py) and the payload checks."""

import pytest
from django.db import connection

from ledger import seal_signing
from ledger.chain import GENESIS, batches_check, chain_seal, chain_verify, link_hash
from ledger.models import Event, EventSeal, SealBatch
from ledger.seal_signing import SignedHead
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import grant
from tests.ledger.helpers import append, recompute_unkeyed_chain, rewrite_as_superuser

# transaction=True: the sealer seals only committed events.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def walk_in_seal_order() -> list[str]:
    """The chain as it is defined: the seals in seq order."""
    problems: list[str] = []
    previous, expected = GENESIS, 1
    for seal in EventSeal.objects.select_related("event").order_by("seq"):
        if seal.seq != expected:
            problems.append(f"chain: seal #{expected} is missing (next is #{seal.seq})")
            expected = seal.seq
        if link_hash(previous, seal.event) != seal.hash:
            event = seal.event
            problems.append(
                f"chain: event {event.id} ({event.stream}@{event.version} {event.type}) "
                f"does not match seal #{seal.seq}: it was changed after it was sealed"
            )
        previous, expected = seal.hash, expected + 1
    problems.extend(batches_check().problems)
    last = SealBatch.objects.order_by("-id").first()
    unsealed = Event.objects.filter(seal__isnull=True, txid__lt=last.horizon_txid)
    problems.extend(
        f"chain: event {event_id} is below the sealed horizon but not sealed"
        for event_id in unsealed.order_by("id").values_list("id", flat=True)[:20]
    )
    return problems


@pytest.fixture
def sealed() -> list[Event]:
    """12 events sealed in three passes: seqs 1–12, in id order."""
    events = []
    for batch in range(3):
        events += [append(f"job:{batch}-{i}", memo=f"m{i}") for i in range(4)]
        chain_seal()
    assert chain_verify() == []
    return events


def _other_seals_hash(seq: int) -> str:
    return f"(SELECT hash FROM ledger_eventseal WHERE seq = {seq})"


TAMPERS = {
    "an event's payload": (
        "ledger_event",
        "UPDATE ledger_event SET payload = jsonb_set(payload, '{{memo}}', '\"a lie\"') "
        "WHERE id = {event}",
    ),
    "an event's actor": ("ledger_event", "UPDATE ledger_event SET actor = 'm' WHERE id = {event}"),
    "a middle seal deleted": ("ledger_eventseal", "DELETE FROM ledger_eventseal WHERE seq = 6"),
    "the first seal deleted": ("ledger_eventseal", "DELETE FROM ledger_eventseal WHERE seq = 1"),
    "two seals in a row deleted": (
        "ledger_eventseal",
        "DELETE FROM ledger_eventseal WHERE seq IN (3, 4)",
    ),
    "seals deleted in two places": (
        "ledger_eventseal",
        "DELETE FROM ledger_eventseal WHERE seq IN (2, 7, 8)",
    ),
    "the last seal deleted": ("ledger_eventseal", "DELETE FROM ledger_eventseal WHERE seq = 12"),
    "the last pass's seals deleted": (
        "ledger_eventseal",
        "DELETE FROM ledger_eventseal WHERE seq > 8",
    ),
    "a seal's hash rewritten": (
        "ledger_eventseal",
        "UPDATE ledger_eventseal SET hash = md5('a') || md5('b') WHERE seq = 7",
    ),
    "two seals' hashes swapped": (
        "ledger_eventseal",
        "UPDATE ledger_eventseal SET hash = CASE seq WHEN 2 THEN "
        + _other_seals_hash(9)
        + " ELSE "
        + _other_seals_hash(2)
        + " END WHERE seq IN (2, 9)",
    ),
    "the last pass's head rewritten": (
        "ledger_sealbatch",
        "UPDATE ledger_sealbatch SET head_hash = repeat('0', 64) "
        "WHERE id = (SELECT max(id) FROM ledger_sealbatch)",
    ),
}


@pytest.mark.parametrize(("table", "statement"), TAMPERS.values(), ids=TAMPERS.keys())
def test_verify_names_each_tamper_as_a_walk_in_seal_order_does(sealed, table, statement):
    rewrite_as_superuser(statement.format(event=sealed[4].id), table)
    problems = chain_verify()
    assert problems, "the tamper went unnoticed"
    assert problems == walk_in_seal_order()
    assert [p for p in verify_ledger().problems if p.startswith("chain:")] == problems


def _seal_in_this_order(events: list[Event]) -> None:
    """Seal `events` by hand in the given order, as passes over late commits would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        horizon = cursor.fetchone()[0]
    head, seals = GENESIS, []
    for seq, event in enumerate(events, start=1):
        head = link_hash(head, event)
        seals.append((seq, event, head))
    signed = SignedHead(1, len(seals), len(seals), horizon, head, seal_signing.key_id())
    batch = SealBatch.objects.create(
        first_seq=1,
        last_seq=len(seals),
        count=len(seals),
        head_hash=head,
        horizon_txid=horizon,
        key_id=signed.key_id,
        signature=seal_signing.head_sign(signed),
    )
    EventSeal.objects.bulk_create(
        EventSeal(seq=s, event=e, batch=batch, hash=h) for s, e, h in seals
    )


def test_seals_out_of_id_order_verify_and_a_tamper_among_them_is_named():
    events = [append(f"job:{i}") for i in range(8)]
    order = [0, 1, 5, 2, 3, 7, 4, 6]  # late commits sealed after later ids, twice
    _seal_in_this_order([events[i] for i in order])
    assert chain_verify() == [] == walk_in_seal_order()
    rewrite_as_superuser(
        f"UPDATE ledger_event SET actor = 'm' WHERE id = {events[5].id}", "ledger_event"
    )
    problems = chain_verify()
    assert (
        problems
        == walk_in_seal_order()
        == [
            f"chain: event {events[5].id} (job:5@1 TestNoted) does not match seal #3: it was "
            "changed after it was sealed"
        ]
    )
    rewrite_as_superuser("DELETE FROM ledger_eventseal WHERE seq = 6", "ledger_eventseal")
    assert chain_verify() == walk_in_seal_order()
    assert "chain: seal #6 is missing (next is #7)" in chain_verify()


def test_an_edited_amount_with_the_chain_recomputed_is_named_with_and_without_the_chain(alice):
    grant(alice, 1_000)  # opens the accounts: the next grant is sealed alone
    chain_seal()
    grant(alice, 5_000)
    chain_seal()
    event = Event.objects.filter(type="CreditsGranted").latest("id")
    rewrite_as_superuser(
        "UPDATE ledger_event SET payload = jsonb_set(payload, '{amount_minor}', '50000') "
        f"WHERE id = {event.id}",
        "ledger_event",
    )
    recompute_unkeyed_chain()
    named = (
        f"payload: event {event.id} ({event.stream}@1 CreditsGranted): its postings move "
        f"external:funding -5000, user:{alice.pk}:available +5000, its figures say "
        f"external:funding -50000, user:{alice.pk}:available +50000"
    )
    assert named in verify_ledger(check_chain=False).problems
    problems = verify_ledger().problems
    assert named in problems
    assert any(p.startswith("chain: seal batch ") and f", event {event.id}," in p for p in problems)
