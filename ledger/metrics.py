"""The ledger's figures for /metrics (docs/metrics.md): the event log, entries and credits as
they are posted, cashouts as they move and those still open, and the nightly verification."""

from collections.abc import Iterable

from django.db.models import Count, Max, Sum

from core.metrics import after_commit, cached, counter
from ledger.models import Event, SealBatch
from ledger.models_cashouts import Cashout, CashoutStatus

EVENTS_HELP = (
    "Events in the ledger's log. kind=all is the highest event id: read from the primary key's "
    "index, it counts ids taken by writes that rolled back too, so it may exceed the rows a "
    "little. kind=unsealed counts, exactly, the events at or past the last sealing pass's "
    "horizon (an index range over the log's tail; every event before it is sealed), or kind=all's "
    "figure before the first pass."
)


def event_samples() -> Iterable[tuple[dict[str, str], float]]:
    # A COUNT(*) of the whole log on every scrape would read every row of the largest table.
    highest = Event.objects.aggregate(highest=Max("id"))["highest"] or 0
    last = SealBatch.objects.order_by("-id").values_list("horizon_txid", flat=True).first()
    unsealed = highest if last is None else Event.objects.filter(txid__gte=last).count()
    return [({"kind": "all"}, highest), ({"kind": "unsealed"}, unsealed)]


ENTRIES = counter("computepool_ledger_entries_total", "Ledger entries posted, by kind.", ["kind"])
CREDITED = counter(
    "computepool_ledger_credited_minor_total",
    "Minor units credited to accounts by posted entries, by entry kind, the credited account's "
    "kind and currency: a settlement's credit to revenue is the platform's fee, to earnings "
    "the operators' share; a release's to available is what holds gave back.",
    ["entry_kind", "account_kind", "currency"],
)
CASHOUTS = counter(
    "computepool_cashouts_total",
    "Cashouts moved into a status (requested, approved, rejected, paid).",
    ["status"],
)
VERIFICATIONS = counter(
    "computepool_ledger_verifications_total",
    "Scheduled verify_ledger runs, by result (ok, failed: differences found, error: it could "
    "not run).",
    ["result"],
)

_OPEN = (CashoutStatus.REQUESTED, CashoutStatus.APPROVED)


def entry_counted(kind: str, legs: Iterable[tuple[str, int, str]]) -> None:
    """Count a posted entry once its transaction commits; `legs` as (account kind, amount,
    currency)."""
    credits = [
        (account_kind, amount, currency) for account_kind, amount, currency in legs if amount > 0
    ]

    def count() -> None:
        ENTRIES.labels(kind).inc()
        for account_kind, amount, currency in credits:
            CREDITED.labels(kind, account_kind, currency).inc(amount)

    after_commit(count)


def cashout_counted(status: str) -> None:
    after_commit(lambda: CASHOUTS.labels(status).inc())


@cached
def _open_cashouts() -> dict[str, tuple[int, int]]:
    # The open statuses only, through the (status, approved_at) index: paid and rejected
    # cashouts are history, counted by CASHOUTS as they happen.
    rows = (
        Cashout.objects.filter(status__in=_OPEN)
        .values("status")
        .annotate(n=Count("id"), total=Sum("amount_minor"))
        .order_by()
    )
    return {row["status"]: (row["n"], row["total"] or 0) for row in rows}


def open_cashout_samples() -> Iterable[tuple[dict[str, str], float]]:
    found = _open_cashouts()
    return [({"status": status}, found.get(status, (0, 0))[0]) for status in _OPEN]


def open_cashout_minor_samples() -> Iterable[tuple[dict[str, str], float]]:
    found = _open_cashouts()
    return [({"status": status}, found.get(status, (0, 0))[1]) for status in _OPEN]
