"""Hold at submit, settle each attempt exactly once, release what is left when the job ends."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from ledger.accounts import REVENUE, available_code, earnings_code, job_held_code
from ledger.errors import IdempotencyConflict, InsufficientFunds
from ledger.models import Account, Entry, Event, PriceBook
from ledger.pricing import price_book_copy
from ledger.services import account_balance
from ledger.settlement import (
    attempt_settle,
    credits_hold,
    hold_release,
    job_held_balance,
    settlement_check,
    settlement_recompute,
    settlements_for_attempts,
)
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import balance, grant, hold, settle

pytestmark = pytest.mark.usefixtures("price_books")

HOUR_MS = 3_600_000


def revenue() -> int:
    account = Account.objects.filter(code=REVENUE).first()
    return account_balance(account) if account else 0


def test_a_hold_moves_the_maximum_cost_to_the_jobs_own_account(alice):
    grant(alice, 1_000_000)
    entry = hold(alice, 1, 400_000)
    assert balance(available_code(alice.pk)) == 600_000
    assert job_held_balance(1) == 400_000
    held = Account.objects.get(code=job_held_code(1))
    assert held.owner_id == alice.pk and held.kind == "held"
    assert entry.event.type == "CreditsHeld"
    assert hold(alice, 1, 400_000).pk == entry.pk  # the same submit again holds nothing more
    with pytest.raises(IdempotencyConflict), transaction.atomic():
        credits_hold(submitter_id=alice.pk, job_id=1, amount=1, actor="jobs")
    assert balance(available_code(alice.pk)) == 600_000


def test_not_enough_credits_is_a_402_and_the_callers_transaction_rolls_back(alice):
    grant(alice, 1_000)
    with pytest.raises(InsufficientFunds, match=r"needs 50\.00 credits.*only 10\.00"):
        with transaction.atomic():
            # Something the caller (the jobs app) wrote before asking for the hold ...
            Group.objects.create(name="job-42-marker")
            credits_hold(submitter_id=alice.pk, job_id=42, amount=5_000, actor="jobs")
    # ... is gone with it, and nothing of the hold was written.
    assert not Group.objects.filter(name="job-42-marker").exists()
    assert not Account.objects.filter(code=job_held_code(42)).exists()
    assert balance(available_code(alice.pk)) == 1_000
    with pytest.raises(InsufficientFunds, match=r"only 0\.00"):
        credits_hold(submitter_id=4242, job_id=43, amount=1, actor="jobs")


def test_settling_pays_the_operator_80_and_the_platform_20_percent(alice, bob):
    grant(alice, 1_000_000)
    hold(alice, 7, 500_000)
    entry = settle(
        alice,
        bob,
        job_id=7,
        attempt_id=70,
        price=105,
        runtime_ms=HOUR_MS // 2,
        tier="rtx-4090",
        region="IN",
        node_id=3,
    )
    # 105/s for 1800 s = 189000; fee floor(189000 * 0.2) = 37800; operator 151200.
    assert job_held_balance(7) == 500_000 - 189_000
    assert balance(earnings_code(bob.pk)) == 151_200
    assert revenue() == 37_800
    p = entry.event.payload
    assert (p["cost_minor"], p["fee_minor"], p["operator_minor"], p["fee_bps"]) == (
        189_000,
        37_800,
        151_200,
        2000,
    )
    assert (p["tier"], p["region"], p["node_id"], p["book_version"]) == (
        "rtx-4090",
        "IN",
        3,
        PriceBook.objects.order_by("-effective_from").first().pk,
    )
    assert verify_ledger().ok


def test_the_fee_remainder_goes_to_the_operator(alice, bob):
    grant(alice, 100)
    hold(alice, 8, 100)
    entry = settle(alice, bob, job_id=8, attempt_id=80, price=9, runtime_ms=1000)
    assert (entry.event.payload["fee_minor"], balance(earnings_code(bob.pk))) == (1, 8)


def test_runtime_is_capped_at_the_timeout_and_the_cost_at_what_is_held(alice, bob):
    grant(alice, 1_000_000)
    hold(alice, 9, 10_000)
    over = settle(
        alice, bob, job_id=9, attempt_id=90, price=10, runtime_ms=5_000_000, timeout_ms=600_000
    )
    assert over.event.payload["billed_ms"] == 600_000
    assert (
        over.event.payload["cost_minor"] == 6_000 and over.event.payload["charged_minor"] == 6_000
    )
    capped = settle(
        alice, bob, job_id=9, attempt_id=91, price=10, runtime_ms=600_000, timeout_ms=600_000
    )
    p = capped.event.payload
    assert (p["cost_minor"], p["held_before_minor"], p["charged_minor"]) == (6_000, 4_000, 4_000)
    assert job_held_balance(9) == 0
    assert verify_ledger().ok


def test_an_attempt_is_settled_exactly_once(alice, bob):
    grant(alice, 100_000)
    hold(alice, 10, 100_000)
    first = settle(alice, bob, job_id=10, attempt_id=100, price=10, runtime_ms=2_000)
    again = settle(alice, bob, job_id=10, attempt_id=100, price=10, runtime_ms=2_000)
    assert first.pk == again.pk
    assert job_held_balance(10) == 100_000 - 20
    assert Event.objects.filter(idempotency_key="settle:attempt:100").count() == 1
    with pytest.raises(IdempotencyConflict, match="different figures"):
        settle(alice, bob, job_id=10, attempt_id=100, price=10, runtime_ms=9_000)
    assert job_held_balance(10) == 100_000 - 20


def test_a_replay_after_the_rules_changed_still_returns_the_original(alice, bob):
    grant(alice, 100_000)
    hold(alice, 11, 100_000)
    first = settle(alice, bob, job_id=11, attempt_id=110, price=10, runtime_ms=10_000)
    newer = price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(seconds=1),
    )
    PriceBook.objects.filter(pk=newer.pk).update(
        platform_fee_bps=1000, effective_from=timezone.now()
    )
    again = settle(alice, bob, job_id=11, attempt_id=110, price=10, runtime_ms=10_000)
    assert again.pk == first.pk
    later = settle(alice, bob, job_id=11, attempt_id=111, price=10, runtime_ms=10_000)
    assert later.event.payload["fee_bps"] == 1000 and later.event.payload["fee_minor"] == 10
    assert verify_ledger().ok


def test_the_fee_is_taken_under_the_book_in_force_when_the_work_was_priced(alice, bob):
    grant(alice, 100_000)
    hold(alice, 12, 100_000)
    claimed = timezone.now()
    newer = price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(seconds=1),
    )
    PriceBook.objects.filter(pk=newer.pk).update(
        platform_fee_bps=500, effective_from=timezone.now()
    )
    entry = settle(
        alice, bob, job_id=12, attempt_id=120, price=100, runtime_ms=1000, priced_at=claimed
    )
    assert entry.event.payload["fee_bps"] == 2000


def test_an_infrastructure_failure_is_settled_at_zero(alice, bob):
    grant(alice, 10_000)
    hold(alice, 13, 10_000)
    assert (
        settle(alice, bob, job_id=13, attempt_id=130, price=100, runtime_ms=50_000, charge=False)
        is None
    )
    event = Event.objects.get(idempotency_key="settle:attempt:130")
    assert event.payload["charged_minor"] == 0 and "postings" not in event.payload
    assert not Entry.objects.filter(event=event).exists()
    assert job_held_balance(13) == 10_000 and balance(earnings_code(bob.pk)) == 0
    assert (
        settle(alice, bob, job_id=13, attempt_id=130, price=100, runtime_ms=50_000, charge=False)
        is None
    )
    assert Event.objects.filter(idempotency_key="settle:attempt:130").count() == 1
    assert set(settlements_for_attempts([130, 131])) == {130}
    assert verify_ledger().ok


def test_release_returns_exactly_what_is_left_after_several_attempts(alice, bob, mallory):
    grant(alice, 1_000_000)
    hold(alice, 14, 300_000)
    settle(alice, bob, job_id=14, attempt_id=140, price=50, runtime_ms=1_000_000)  # 50000
    settle(alice, mallory, job_id=14, attempt_id=141, price=75, runtime_ms=400_000)  # 30000
    settle(alice, bob, job_id=14, attempt_id=142, price=75, runtime_ms=1, charge=False)
    with transaction.atomic():
        released = hold_release(job_id=14, submitter_id=alice.pk, actor="jobs")
    assert released.event.payload["amount_minor"] == 300_000 - 80_000
    assert job_held_balance(14) == 0
    assert balance(available_code(alice.pk)) == 1_000_000 - 80_000
    with transaction.atomic():
        assert hold_release(job_id=14, submitter_id=alice.pk, actor="jobs") is None
    # A settlement that arrives after the release finds nothing held and charges nothing.
    assert settle(alice, bob, job_id=14, attempt_id=143, price=75, runtime_ms=9_000) is None
    with transaction.atomic():
        assert hold_release(job_id=999, submitter_id=alice.pk, actor="jobs") is None
    assert verify_ledger().ok


def test_a_job_is_settled_only_against_its_own_submitters_hold(alice, bob, mallory):
    grant(alice, 1_000)
    hold(alice, 15, 1_000)
    with pytest.raises(DomainError, match="another submitter"), transaction.atomic():
        attempt_settle(
            attempt_id=150,
            job_id=15,
            submitter_id=mallory.pk,
            operator_id=bob.pk,
            price_per_s_minor=1,
            runtime_ms=1000,
            timeout_ms=1000,
            actor="jobs",
        )
    with pytest.raises(DomainError, match="another submitter"), transaction.atomic():
        hold_release(job_id=15, submitter_id=mallory.pk, actor="jobs")
    assert job_held_balance(15) == 1_000


@pytest.mark.parametrize(
    "bad",
    [
        {"price_per_s_minor": -1},
        {"runtime_ms": 1.5},
        {"timeout_ms": None},
        {"charge": "yes"},
        {"attempt_id": 0},
    ],
)
def test_it_refuses_malformed_settlement_inputs(alice, bob, bad):
    args = dict(
        attempt_id=1,
        job_id=1,
        submitter_id=alice.pk,
        operator_id=bob.pk,
        price_per_s_minor=1,
        runtime_ms=1,
        timeout_ms=1,
        charge=True,
        actor="jobs",
    )
    with pytest.raises(DomainError), transaction.atomic():
        attempt_settle(**{**args, **bad})


def test_every_settlement_can_be_recomputed_from_its_record(alice, bob):
    grant(alice, 10_000_000)
    hold(alice, 16, 10_000_000)
    entries = [
        settle(alice, bob, job_id=16, attempt_id=160 + i, price=price, runtime_ms=ms)
        for i, (price, ms) in enumerate([(105, 3_600_000), (75, 1_234), (1, 999), (62, 77_777)])
    ]
    for entry in filter(None, entries):
        figures = settlement_recompute(entry)
        p = entry.event.payload
        assert (figures.cost_minor, figures.fee_minor, figures.operator_minor) == (
            p["cost_minor"],
            p["fee_minor"],
            p["operator_minor"],
        )
        assert settlement_check(entry.event) == []
    assert entries[0].event.payload["cost_minor"] == 378_000


def test_a_settlement_that_does_not_add_up_is_named(alice, bob):
    grant(alice, 10_000)
    hold(alice, 17, 10_000)
    entry = settle(alice, bob, job_id=17, attempt_id=170, price=100, runtime_ms=10_000)
    forged = Event(
        pk=entry.event.pk, type="AttemptSettled", payload={**entry.event.payload, "fee_minor": 1}
    )
    problems = settlement_check(forged)
    assert any("fee_minor recorded 1, recomputed 200" in p for p in problems), problems


def test_a_settlement_is_a_handful_of_queries(alice, bob, django_assert_max_num_queries):
    grant(alice, 10_000)
    hold(alice, 18, 10_000)
    settle(alice, bob, job_id=18, attempt_id=180, price=10, runtime_ms=1_000)  # opens accounts
    # Lock the hold, look for a twin, read the book and the accounts, append the event, write
    # the entry and its postings, move two balances (revenue is derived: no row to update).
    with django_assert_max_num_queries(10):
        attempt_settle(
            attempt_id=181,
            job_id=18,
            submitter_id=alice.pk,
            operator_id=bob.pk,
            price_per_s_minor=10,
            runtime_ms=1_000,
            timeout_ms=10_000,
            actor="jobs",
        )
