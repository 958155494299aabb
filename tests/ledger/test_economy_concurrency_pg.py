"""Sixteen real connections settling attempts and cashing out against the same accounts."""

from collections import defaultdict
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.accounts import REVENUE, available_code, cashout_code, earnings_code, job_held_code
from ledger.errors import InsufficientFunds
from ledger.models import Account, Cashout, Event, PriceBook
from ledger.pricing import price_book_copy
from ledger.services import account_balance
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import balance, grant, hold, request_cashout, settle
from tests.ledger.helpers import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("price_books"),
]

WORKERS = 16
JOBS = [1, 2, 3, 4]
HOLD = 2_000_000
CASHOUT = 10_000  # ₹1.00 under the test book's minimum


def test_concurrent_settlements_and_cashouts_lose_nothing(alice, bob, mallory):
    newest = PriceBook.objects.order_by("-effective_from").first()
    book = price_book_copy(source=newest, effective_from=timezone.now() + timedelta(days=1))
    PriceBook.objects.filter(pk=book.pk).update(
        min_cashout_paise=100, effective_from=timezone.now()
    )
    grant(alice, HOLD * len(JOBS))
    for job_id in JOBS:
        hold(alice, job_id, HOLD)
    operators = [bob, mallory]
    # 64 attempts over 4 jobs; every attempt is fired by two workers at once.
    attempts = {
        a: (JOBS[a % len(JOBS)], operators[a % 2], 50 + a, 1_000 * (a + 1)) for a in range(1, 65)
    }

    def work(i: int) -> dict:
        done = {"settled": [], "cashouts": 0, "refused": 0}
        for attempt_id, (job_id, operator, price, ms) in attempts.items():
            if attempt_id % (WORKERS // 2) != i % (WORKERS // 2):
                continue
            entry = settle(
                alice, operator, job_id=job_id, attempt_id=attempt_id, price=price, runtime_ms=ms
            )
            done["settled"].append((attempt_id, entry.pk))
            try:
                request_cashout(operator, CASHOUT)
                done["cashouts"] += 1
            except InsufficientFunds:
                done["refused"] += 1
        return done

    results = race(WORKERS, work, start_s=20, join_s=120)
    failures = [r for r in results if isinstance(r, Exception)]
    assert not failures, failures

    # Each attempt settled once: both workers that fired it got the same entry.
    entries = defaultdict(set)
    for result in results:
        for attempt_id, entry_id in result["settled"]:
            entries[attempt_id].add(entry_id)
    assert set(entries) == set(attempts) and all(len(e) == 1 for e in entries.values())
    events = Event.objects.filter(type="AttemptSettled")
    assert events.count() == len(attempts)

    # Totals are exact: recompute every figure from the inputs.
    charged, earned, fee = defaultdict(int), defaultdict(int), 0
    for job_id, operator, price, ms in attempts.values():
        cost = price * ms // 1000
        charged[job_id] += cost
        earned[operator.pk] += cost - cost * 2000 // 10000
        fee += cost * 2000 // 10000
    for job_id in JOBS:
        assert balance(job_held_code(job_id)) == HOLD - charged[job_id]
    cashed = sum(r["cashouts"] for r in results)
    assert Cashout.objects.count() == cashed > 0
    for operator in operators:
        reserved = sum(
            Cashout.objects.filter(operator=operator).values_list("amount_minor", flat=True)
        )
        assert balance(earnings_code(operator.pk)) == earned[operator.pk] - reserved
        assert balance(cashout_code(operator.pk)) == reserved
    assert account_balance(Account.objects.get(code=REVENUE)) == fee
    assert balance(available_code(alice.pk)) == 0
    assert not Account.objects.filter(balance__lt=0, allow_negative=False).exists()
    report = verify_ledger()
    assert report.ok, report.problems


def test_the_same_settlement_fired_sixteen_times_moves_money_once(alice, bob):
    grant(alice, 1_000_000)
    hold(alice, 77, 1_000_000)

    def work(i: int):
        return settle(alice, bob, job_id=77, attempt_id=7700, price=100, runtime_ms=10_000).pk

    results = race(WORKERS, work, start_s=20, join_s=120)
    assert all(isinstance(r, int) for r in results), results
    assert len(set(results)) == 1
    assert balance(job_held_code(77)) == 1_000_000 - 1_000
    assert balance(earnings_code(bob.pk)) == 800
    assert verify_ledger().ok


def test_sixteen_cashouts_against_one_balance_never_overdraw(alice, bob):
    newest = PriceBook.objects.order_by("-effective_from").first()
    book = price_book_copy(source=newest, effective_from=timezone.now() + timedelta(days=1))
    PriceBook.objects.filter(pk=book.pk).update(
        min_cashout_paise=100, effective_from=timezone.now()
    )
    grant(alice, 62_500)
    hold(alice, 5, 62_500)
    settle(alice, bob, job_id=5, attempt_id=5, price=62_500, runtime_ms=1000)  # earns 50,000

    def work(i: int):
        return request_cashout(bob, CASHOUT).pk

    results = race(WORKERS, work, start_s=20, join_s=120)
    granted = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, InsufficientFunds)]
    assert len(granted) == 5 and len(refused) == WORKERS - 5, results
    assert balance(earnings_code(bob.pk)) == 0
    assert balance(cashout_code(bob.pk)) == 50_000
    assert verify_ledger().ok
