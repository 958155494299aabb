"""An operator's earnings by period (ledger.earnings): what work paid in, by UTC day and month,
never the cashout entries that move earnings out and back."""

from datetime import UTC, date, datetime

import pytest
import time_machine

from ledger.cashouts import cashout_reject
from ledger.earnings import EarnedDay, earned_by_day, earned_totals
from tests.ledger.economy_helpers import earn, request_cashout
from tests.proof.conftest import min_cashout_minor

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _earn_at(when: datetime, alice, bob, amount: int, job_id: int) -> None:
    with time_machine.travel(when, tick=False):
        earn(alice, bob, amount, job_id=job_id)


def test_today_this_month_and_ever_are_utc_periods(alice, bob, mallory):
    _earn_at(datetime(2026, 10, 31, 23, 59, tzinfo=UTC), alice, bob, 1_000, 1)
    _earn_at(datetime(2026, 11, 1, 0, 0, tzinfo=UTC), alice, bob, 200, 2)
    _earn_at(datetime(2026, 11, 26, 23, 59, 59, tzinfo=UTC), alice, bob, 30, 3)
    _earn_at(datetime(2026, 11, 27, 0, 0, tzinfo=UTC), alice, bob, 4, 4)
    _earn_at(datetime(2026, 11, 27, 0, 0, tzinfo=UTC), alice, mallory, 99_999, 5)
    totals = earned_totals(user_id=bob.pk, now=NOW)
    assert (totals.today, totals.this_month, totals.total) == (4, 234, 1_234)
    days = earned_by_day(user_id=bob.pk, days=3, now=NOW)
    assert days == [
        EarnedDay(date(2026, 11, 25), 0),
        EarnedDay(date(2026, 11, 26), 30),
        EarnedDay(date(2026, 11, 27), 4),
    ]


def test_a_cashout_and_its_rejection_are_not_earnings(alice, bob):
    minimum = min_cashout_minor()
    earn(alice, bob, 2 * minimum, job_id=11)
    before = earned_totals(user_id=bob.pk)
    cashout = request_cashout(bob, minimum)
    assert earned_totals(user_id=bob.pk) == before
    cashout_reject(cashout_id=cashout.pk, reason="wrong account", actor="user:finance")
    assert earned_totals(user_id=bob.pk) == before
    assert before.total == 2 * minimum
    assert sum(d.amount for d in earned_by_day(user_id=bob.pk)) == 2 * minimum


def test_an_operator_with_nothing_earned_has_thirty_empty_days(bob):
    days = earned_by_day(user_id=bob.pk, now=NOW)
    assert len(days) == 30 and {d.amount for d in days} == {0}
    assert days[0].day == date(2026, 10, 29) and days[-1].day == date(2026, 11, 27)
