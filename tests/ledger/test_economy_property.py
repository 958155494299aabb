"""Random sequences of top-ups, holds, settlements, releases and cashouts against a model.

After every step the live balances equal the model's, nothing is negative, and the standing
invariants hold; after the sequence, verify_ledger replays everything and finds no difference.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from ledger.accounts import (
    FUNDING,
    PAYOUTS,
    REVENUE,
    available_code,
    cashout_code,
    earnings_code,
    job_held_code,
)
from ledger.cashouts import CashoutConflict, cashout_approve, cashout_mark_paid, cashout_reject
from ledger.economy_projection import economy_invariants
from ledger.errors import InsufficientFunds
from ledger.models import Account, Event, PriceBook
from ledger.pricing import price_book_copy
from ledger.services import account_balance
from ledger.settlement import hold_release
from ledger.verify import verify_ledger
from people.services import user_create
from tests.ledger.conftest import seed_price_books
from tests.ledger.economy_helpers import grant, hold, request_cashout, settle

MIN_CASHOUT = 10_000  # the test book's minimum: ₹1.00, so cashouts happen often

pick = st.integers(min_value=0, max_value=50)
settle_step = st.tuples(
    st.just("settle"),
    pick,
    st.integers(0, 1),
    st.integers(0, 400),  # price per second
    st.integers(0, 5_000_000),  # runtime ms
    st.integers(1, 3_000_000),  # timeout ms
    st.booleans(),  # charge
)
step = st.one_of(
    st.tuples(st.just("topup"), st.integers(1, 2_000_000)),
    st.tuples(st.just("hold"), st.integers(1, 1_500_000)),
    settle_step,
    settle_step,  # twice: settlements are what the economy is about
    st.tuples(st.just("replay"), pick),
    st.tuples(st.just("release"), pick),
    st.tuples(st.just("cashout"), st.integers(0, 1), st.integers(100, 40_000)),  # whole paise
    st.tuples(st.sampled_from(["approve", "reject", "pay"]), pick),
)


def live(code: str) -> int:
    account = Account.objects.filter(code=code).first()
    return account_balance(account) if account else 0


class TestEconomyProperty(TestCase):
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(step, min_size=8, max_size=30))
    def test_invariants_hold_after_every_step(self, steps):
        # Start funded with one job held, so the random steps find money to move.
        steps = [("topup", 3_000_000), ("hold", 1_000_000), *steps]
        seed_price_books()
        newest = PriceBook.objects.order_by("-effective_from").first()
        book = price_book_copy(source=newest, effective_from=timezone.now() + timedelta(days=1))
        PriceBook.objects.filter(pk=book.pk).update(
            min_cashout_paise=MIN_CASHOUT // 100, effective_from=timezone.now()
        )
        alice = user_create(username="alice", roles=["submitter"])
        operators = [user_create(username=n, roles=["operator"]) for n in ("bob", "mallory")]
        model: dict[str, int] = {}
        jobs: list[int] = []
        attempts: list[tuple] = []
        cashouts: list[list] = []  # [cashout, status]

        def add(code: str, amount: int) -> None:
            model[code] = model.get(code, 0) + amount

        for n, current in enumerate(steps, start=1):
            kind = current[0]
            if kind == "topup":
                grant(alice, current[1])
                add(available_code(alice.pk), current[1])
                add(FUNDING, -current[1])
            elif kind == "hold":
                job_id = len(jobs) + 1
                enough = model.get(available_code(alice.pk), 0) >= current[1]
                try:
                    hold(alice, job_id, current[1])
                except InsufficientFunds:
                    assert not enough
                else:
                    assert enough
                    jobs.append(job_id)
                    add(available_code(alice.pk), -current[1])
                    add(job_held_code(job_id), current[1])
            elif kind == "settle" and jobs:
                _, j, o, price, runtime, timeout, charge = current
                job_id, operator = jobs[j % len(jobs)], operators[o]
                held = model.get(job_held_code(job_id), 0)
                cost = price * min(runtime, timeout) // 1000 if charge else 0
                charged = min(cost, held)
                fee = charged * 2000 // 10000
                args = dict(
                    job_id=job_id,
                    attempt_id=n,
                    price=price,
                    runtime_ms=runtime,
                    timeout_ms=timeout,
                    charge=charge,
                )
                entry = settle(alice, operator, **args)
                assert (entry is None) == (charged == 0)
                attempts.append((operator, args))
                add(job_held_code(job_id), -charged)
                add(earnings_code(operator.pk), charged - fee)
                add(REVENUE, fee)
                event("settle charged" if charged else "settle at zero")
            elif kind == "replay" and attempts:
                operator, args = attempts[current[1] % len(attempts)]
                settle(alice, operator, **args)  # moves nothing
            elif kind == "release" and jobs:
                job_id = jobs[current[1] % len(jobs)]
                with transaction.atomic():
                    hold_release(job_id=job_id, submitter_id=alice.pk, actor="jobs")
                add(available_code(alice.pk), model.get(job_held_code(job_id), 0))
                model[job_held_code(job_id)] = 0
            elif kind == "cashout":
                operator, amount = operators[current[1]], current[2] * 100
                enough = model.get(earnings_code(operator.pk), 0) >= amount
                big_enough = amount >= MIN_CASHOUT
                try:
                    cashout = request_cashout(operator, amount)
                except InsufficientFunds:
                    assert big_enough and not enough
                except Exception as exc:
                    assert not big_enough, exc
                else:
                    assert enough and big_enough
                    cashouts.append([cashout, "requested"])
                    add(earnings_code(operator.pk), -amount)
                    add(cashout_code(operator.pk), amount)
            elif kind in ("approve", "reject", "pay") and cashouts:
                pair = cashouts[current[1] % len(cashouts)]
                cashout, status = pair
                code = cashout_code(cashout.operator_id)
                allowed = {
                    "approve": {"requested", "approved", "paid"},
                    "reject": {"requested", "approved", "rejected"},
                    "pay": {"approved"},
                }[kind]
                try:
                    with transaction.atomic():
                        if kind == "approve":
                            cashout_approve(cashout_id=cashout.pk, actor="carol")
                        elif kind == "reject":
                            cashout_reject(cashout_id=cashout.pk, reason="r", actor="carol")
                        else:
                            cashout_mark_paid(
                                cashout_id=cashout.pk, payout_reference=f"UTR-{n}", actor="carol"
                            )
                except CashoutConflict:
                    assert status not in allowed, (kind, status)
                else:
                    assert status in allowed, (kind, status)
                    if kind == "approve" and status == "requested":
                        pair[1] = "approved"
                    elif kind == "reject" and status != "rejected":
                        pair[1] = "rejected"
                        add(code, -cashout.amount_minor)
                        add(earnings_code(cashout.operator_id), cashout.amount_minor)
                    elif kind == "pay":
                        pair[1] = "paid"
                        add(code, -cashout.amount_minor)
                        add(PAYOUTS, cashout.amount_minor)

            event(f"step {kind}")
            for code, expected in model.items():
                assert live(code) == expected, (n, current, code)
            assert sum(model.values()) == 0
            assert all(v >= 0 for c, v in model.items() if c != FUNDING)
            assert economy_invariants() == []
        settled = Event.objects.filter(type="AttemptSettled").count()
        assert settled == len(attempts)
        report = verify_ledger()
        assert report.ok, report.problems
