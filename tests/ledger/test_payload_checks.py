"""Every payload must agree with itself: what it states against what its postings move. A
replay rebuilds balances from the postings alone, so these are what name an edited amount."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger import registry
from ledger.cashouts import cashout_mark_paid, cashout_reject
from ledger.exports import cashout_export_create
from ledger.models import Event
from ledger.payload_checks import PayloadCheck
from ledger.projections import LoggedEvent
from ledger.settlement import hold_release
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import (
    approved_cashout,
    earn,
    grant,
    hold,
    request_cashout,
    settle,
)
from tests.ledger.helpers import rewrite_as_superuser

pytestmark = pytest.mark.usefixtures("price_books")

MIN = 5_000_000


@pytest.fixture
def economy(alice, bob):
    """One event of every type that moves money, as the services write them."""
    earn(alice, bob, MIN * 3)  # a grant, a hold and a charged settlement
    grant(alice, 10_000)
    hold(alice, 77, 10_000)
    settle(alice, bob, job_id=77, attempt_id=770, price=1, runtime_ms=1_000)
    hold_release(job_id=77, submitter_id=alice.pk, actor="jobs")
    paid = approved_cashout(bob, MIN)
    cashout_mark_paid(cashout_id=paid.pk, payout_reference="UTR-1", actor="user:carol")
    cashout_reject(cashout_id=request_cashout(bob, MIN).pk, reason="no", actor="user:carol")
    now = timezone.now()
    cashout_export_create(
        period_from=now - timedelta(hours=1), period_to=now + timedelta(hours=1), actor="carol"
    )
    return {event.type: event for event in Event.objects.order_by("-id")}  # each type's first


def as_logged(event: Event, **changes) -> LoggedEvent:
    return LoggedEvent(
        event.id, event.stream, event.version, event.type, event.schema_version,
        {**event.payload, **changes}, event.actor, event.idempotency_key, event.recorded_at,
        event.txid,
    )  # fmt: skip


def problems_of(*events: LoggedEvent) -> list[str]:
    check = PayloadCheck()
    for event in events:
        check.apply(event)
    return check.problems


def test_every_payload_the_services_write_agrees_with_itself(economy):
    assert {
        "CreditsGranted", "CreditsHeld", "CreditsReleased", "AttemptSettled", "CashoutRequested",
        "CashoutRejected", "CashoutPaid", "CashoutsExported",
    } <= set(economy)  # fmt: skip
    assert problems_of(*(as_logged(e) for e in Event.objects.order_by("id"))) == []
    assert verify_ledger(check_chain=False).ok


FORGERIES = {
    "a grant's amount": ("CreditsGranted", {"amount_minor": 1}, "its figures say"),
    "a hold's amount": ("CreditsHeld", {"amount_minor": 1}, "its figures say"),
    "a release's amount": ("CreditsReleased", {"amount_minor": 1}, "its figures say"),
    "a cashout's amount": ("CashoutRequested", {"amount_minor": 1}, "its figures say"),
    "a settlement's fee": ("AttemptSettled", {"fee_minor": 0}, "charged_minor"),
    "a settlement's charge": (
        "AttemptSettled",
        {"charged_minor": 1, "operator_minor": 1, "fee_minor": 0},
        "its postings move",
    ),
    "an export's count": ("CashoutsExported", {"count": 7}, "count 7 for 1 cashout ids"),
    "a posting": (
        "CreditsHeld",
        {"postings": [["a", -5, "CRD"], ["b", 4, "CRD"]]},
        "its postings sum to -1 CRD, not zero",
    ),
    "a field's type": ("CreditsHeld", {"amount_minor": "5"}, "payload is invalid at amount_minor"),
}


@pytest.mark.parametrize(("event_type", "changes", "phrase"), FORGERIES.values(), ids=FORGERIES)
def test_a_payload_that_disagrees_with_itself_is_named(economy, event_type, changes, phrase):
    event = economy[event_type]
    problems = problems_of(as_logged(event, **changes))
    where = f"payload: event {event.id} ({event.stream}@{event.version} {event_type})"
    assert problems and all(p.startswith(where) for p in problems)
    assert any(phrase in p for p in problems), problems


def test_a_settlement_that_moves_what_it_states_passes(economy):
    p = economy["AttemptSettled"].payload
    assert registry.get("AttemptSettled").check(p) == []
    assert p["charged_minor"] == p["fee_minor"] + p["operator_minor"] > 0


def test_an_edited_amount_fails_verify_without_the_chain(economy):
    held = economy["CreditsHeld"]
    rewrite_as_superuser(
        "UPDATE ledger_event SET payload = jsonb_set(payload, '{amount_minor}', '1') "
        f"WHERE id = {held.id}",
        "ledger_event",
    )
    problems = verify_ledger(check_chain=False).problems
    job, user, amount = (held.payload[k] for k in ("job_id", "submitter_id", "amount_minor"))
    assert [p for p in problems if p.startswith("payload:")] == [
        f"payload: event {held.id} ({held.stream}@{held.version} CreditsHeld): its postings "
        f"move job:{job}:held +{amount}, user:{user}:available -{amount}, its figures say "
        f"job:{job}:held +1, user:{user}:available -1"
    ]


def test_a_cashout_paid_with_other_amounts_than_requested_is_named(economy, bob):
    paid = economy["CashoutPaid"]
    moved = [[code, amount * 2, currency] for code, amount, currency in paid.payload["postings"]]
    rewrite_as_superuser(
        f"UPDATE ledger_event SET payload = jsonb_set(payload, '{{postings}}', "
        f"'{json.dumps(moved)}') WHERE id = {paid.id}",
        "ledger_event",
    )
    problems = verify_ledger(check_chain=False).problems
    line = f"economy: CashoutPaid {paid.id} of cashout {paid.payload['cashout_id']}: its postings"
    assert any(p.startswith(line) for p in problems), problems


INFERENCE_CLOSED = {
    "request_id": 5, "submitter_id": 1, "operator_id": 2, "node_id": 3, "prompt_tokens": 10,
    "completion_tokens": 20, "rate_in": 1, "rate_out": 1, "ttft_ms": 5, "held_before_minor": 100,
    "cost_minor": 30, "charged_minor": 30, "fee_minor": 6, "operator_minor": 24,
    "released_minor": 70, "fee_bps": 2000, "book_version": 1, "outcome": "stop",
    "postings": [["inference:5:held", -100, "CRD"], ["user:2:earnings", 24, "CRD"],
                 ["platform:revenue", 6, "CRD"], ["user:1:available", 70, "CRD"]],
}  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "phrase"),
    [
        ({}, None),
        ({"released_minor": 71}, "held_before_minor 100 is not charged_minor 30 + released"),
        ({"fee_minor": 7}, "charged_minor 30 is not fee_minor 7 + operator_minor 24"),
        ({"operator_id": 9}, "its figures say inference:5:held -100, platform:revenue +6"),
    ],
)
def test_an_inference_closing_states_what_its_postings_move(changes, phrase):
    found = registry.get("InferenceServed").check({**INFERENCE_CLOSED, **changes})
    assert found == [] if phrase is None else any(phrase in p for p in found), found


def test_an_inference_hold_states_what_its_postings_move():
    payload = {
        "request_id": 5, "submitter_id": 1, "amount_minor": 100,
        "postings": [["user:1:available", -100, "CRD"], ["inference:5:held", 100, "CRD"]],
    }  # fmt: skip
    check = registry.get("InferenceRequested").check
    assert check(payload) == []
    assert check({**payload, "amount_minor": 1000}) != []
