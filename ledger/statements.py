"""Statements: a person's own money over a period, read from the postings.

Everything a person owns in the books is an account with `owner` = them: available credits and
job holds (submitting), earnings and cashout clearing (operating). A statement is the opening and
closing balance of each, the period's totals by what moved them, and the postings themselves.
Periods are half-open, [from, to), by the time the entry was recorded.
"""

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import Q, QuerySet, Sum

from ledger.models import Account, AccountKind, Posting
from ledger.quotes import format_minor

# Headline figures: (entry kind, account kind, sign). A sign of -1 reports a debit as positive.
HEADLINES = {
    "topped_up": ("topup", AccountKind.AVAILABLE, 1),
    "held": ("hold", AccountKind.HELD, 1),
    "spent": ("settlement", AccountKind.HELD, -1),
    "released": ("release", AccountKind.AVAILABLE, 1),
    "earned": ("settlement", AccountKind.EARNINGS, 1),
    "cashout_reserved": ("cashout_request", AccountKind.EARNINGS, -1),
    "cashout_returned": ("cashout_reject", AccountKind.EARNINGS, 1),
    "paid_out": ("cashout_paid", AccountKind.CASHOUT, -1),
}
LINE_COLUMNS = ["posting_id", "recorded_at", "kind", "account", "amount_minor", "credits", "ref"]


@dataclass
class AccountSummary:
    code: str
    kind: str
    opening_minor: int
    closing_minor: int


@dataclass
class Statement:
    user_id: int
    period_from: datetime
    period_to: datetime
    accounts: list[AccountSummary] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)


def _in_period(user_id: int, period_from: datetime, period_to: datetime) -> QuerySet:
    return Posting.objects.filter(
        account__owner_id=user_id,
        entry__created_at__gte=period_from,
        entry__created_at__lt=period_to,
    )


def statement_summary(*, user_id: int, period_from: datetime, period_to: datetime) -> Statement:
    statement = Statement(user_id=user_id, period_from=period_from, period_to=period_to)
    owned = Account.objects.filter(owner_id=user_id)
    opening = Sum("postings__amount", filter=Q(postings__entry__created_at__lt=period_from))
    closing = Sum("postings__amount", filter=Q(postings__entry__created_at__lt=period_to))
    rows = (
        owned.exclude(kind=AccountKind.HELD)
        .order_by("code")
        .annotate(opening=opening, closing=closing)
        .values_list("code", "kind", "opening", "closing")
    )
    statement.accounts = [
        AccountSummary(code=c, kind=k, opening_minor=o or 0, closing_minor=z or 0)
        for c, k, o, z in rows
    ]
    # One line for all job holds: a busy submitter has an account per job.
    holds = owned.filter(kind=AccountKind.HELD).aggregate(opening=opening, closing=closing)
    if holds["opening"] or holds["closing"]:
        statement.accounts.append(
            AccountSummary(
                code="job:*:held",
                kind=AccountKind.HELD,
                opening_minor=holds["opening"] or 0,
                closing_minor=holds["closing"] or 0,
            )
        )
    by_kind = {
        (entry_kind, account_kind): total
        for entry_kind, account_kind, total in _in_period(user_id, period_from, period_to)
        .values_list("entry__kind", "account__kind")
        .annotate(total=Sum("amount"))
        .values_list("entry__kind", "account__kind", "total")
    }
    statement.totals = {
        name: sign * (by_kind.get((entry_kind, account_kind)) or 0)
        for name, (entry_kind, account_kind, sign) in HEADLINES.items()
    }
    return statement


@dataclass(frozen=True)
class Earnings:
    """An operator's earnings in credits' minor units: settled since `since` and ever, what
    can be cashed out now, and what waits in requested cashouts."""

    today: int
    total: int
    balance: int
    cashout_pending: int


def earnings_summary(*, user_id: int, since: datetime) -> Earnings:
    earned = Posting.objects.filter(
        account__owner_id=user_id, account__kind=AccountKind.EARNINGS, entry__kind="settlement"
    ).aggregate(total=Sum("amount"), today=Sum("amount", filter=Q(entry__created_at__gte=since)))
    balances = dict(
        Account.objects.filter(
            owner_id=user_id, kind__in=(AccountKind.EARNINGS, AccountKind.CASHOUT)
        ).values_list("kind", "balance")
    )
    return Earnings(
        today=earned["today"] or 0,
        total=earned["total"] or 0,
        balance=balances.get(AccountKind.EARNINGS, 0),
        cashout_pending=balances.get(AccountKind.CASHOUT, 0),
    )


def _ref(payload: dict) -> str:
    for name in ("attempt_id", "job_id", "request_id", "cashout_id", "payment_id", "reference"):
        value = payload.get(name)
        if value not in (None, ""):
            return f"{name.removesuffix('_id')}:{value}"
    return ""


def statement_lines(
    *,
    user_id: int,
    period_from: datetime,
    period_to: datetime,
    after: int = 0,
    limit: int | None = None,
) -> Iterator[dict]:
    """The period's postings on the person's accounts, oldest first, from posting id `after`."""
    rows = (
        _in_period(user_id, period_from, period_to)
        .filter(id__gt=after)
        .order_by("id")
        .values_list(
            "id",
            "entry__created_at",
            "entry__kind",
            "account__code",
            "amount",
            "entry__event__payload",
        )
    )
    if limit is not None:
        rows = rows[:limit]
    for posting_id, when, kind, code, amount, payload in rows.iterator(chunk_size=1000):
        yield {
            "posting_id": posting_id,
            "recorded_at": when.astimezone(UTC).isoformat(),
            "kind": kind,
            "account": code,
            "amount_minor": amount,
            "credits": format_minor(amount),
            "ref": _ref(payload),
        }


def statement_csv_chunks(
    *, user_id: int, period_from: datetime, period_to: datetime
) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(LINE_COLUMNS)
    lines = statement_lines(user_id=user_id, period_from=period_from, period_to=period_to)
    for n, line in enumerate(lines, start=1):
        writer.writerow([line[c] for c in LINE_COLUMNS])
        if n % 500 == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()
