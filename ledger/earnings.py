"""An operator's earnings over time, read from the postings on their earnings account.

Earned is what work moved into `user:<id>:earnings` (settlements, spot checks, and any later
correction of them); the cashout entries only move earnings out to clearing and back, so they
are not earnings. Days are UTC days, as every time the hub stores.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from ledger.accounts import earnings_code
from ledger.models import Posting

CASHOUT_KINDS = ("cashout_request", "cashout_reject", "cashout_paid")


@dataclass(frozen=True)
class EarnedTotals:
    today: int
    this_month: int
    total: int


@dataclass(frozen=True)
class EarnedDay:
    day: date
    amount: int


def _earned(user_id: int) -> QuerySet[Posting]:
    return Posting.objects.filter(account__code=earnings_code(user_id)).exclude(
        entry__kind__in=CASHOUT_KINDS
    )


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def earned_totals(*, user_id: int, now: datetime | None = None) -> EarnedTotals:
    """Earned today, this calendar month and ever, in credit minor units: one query."""
    today = (now or timezone.now()).astimezone(UTC).date()
    sums = _earned(user_id).aggregate(
        today=Sum("amount", filter=Q(entry__created_at__gte=_midnight(today))),
        month=Sum("amount", filter=Q(entry__created_at__gte=_midnight(today.replace(day=1)))),
        total=Sum("amount"),
    )
    return EarnedTotals(
        today=sums["today"] or 0, this_month=sums["month"] or 0, total=sums["total"] or 0
    )


def earned_by_day(*, user_id: int, days: int = 30, now: datetime | None = None) -> list[EarnedDay]:
    """The last `days` UTC days, oldest first, today included; a day with nothing earned is 0.
    One grouped query."""
    today = (now or timezone.now()).astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    rows = (
        _earned(user_id)
        .filter(entry__created_at__gte=_midnight(first))
        .annotate(day=TruncDate("entry__created_at", tzinfo=UTC))
        .values("day")
        .annotate(amount=Sum("amount"))
        .values_list("day", "amount")
    )
    by_day = dict(rows)
    return [
        EarnedDay(day=first + timedelta(days=n), amount=by_day.get(first + timedelta(days=n), 0))
        for n in range(days)
    ]
