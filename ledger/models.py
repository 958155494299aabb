"""The event log, its hash-chain seals, and the double-entry books.

Events, seals, entries and postings are append-only: the models refuse updates and deletes, and
on PostgreSQL triggers set ENABLE ALWAYS refuse them too (see migrations/0002). Accounts are
projections of the postings, updated in the same transaction as the entry that moves them.
"""

from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ledger.errors import ImmutableRecord

CREDITS = "CRD"  # the platform currency; 1 credit = 100 minor units ("centicredits")


def _refuse(what: str) -> NoReturn:
    raise ImmutableRecord(f"{what} is append-only: record a correcting entry instead")


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> NoReturn:
        _refuse(self.model._meta.label)

    def delete(self) -> NoReturn:
        _refuse(self.model._meta.label)

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model._meta.label)

    def update_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self.model._meta.label)


class AppendOnlyModel(models.Model):
    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            _refuse(self._meta.label)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self._meta.label)


# The events that move a market's spot price (ledger.pricing): its history.
SPOT_EVENT_TYPES = ("SpotPriceChanged", "SpotBoundsChanged")


class Event(AppendOnlyModel):
    """One fact. (stream, version) is unique: two writers at one version, exactly one wins."""

    id = models.BigAutoField(primary_key=True)
    stream = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    type = models.CharField(max_length=64)
    schema_version = models.PositiveSmallIntegerField(default=1)
    payload = models.JSONField()
    actor = models.CharField(max_length=128)
    # Unique where set (the constraint below): most events have none, and a partial index
    # spends nothing on them; nothing looks a key up by prefix, so no pattern index either.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # With an idempotency key: sha256 of the (stream, type, payload) text (ledger_fingerprint),
    # which tells a replay from a conflicting reuse of the key. Without a key: NULL.
    fingerprint = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    # The writing transaction's id, set by a trigger. The sealer
    # reads only below the oldest open transaction, so a late commit is never skipped.
    txid = models.BigIntegerField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["stream", "version"], name="event_stream_version"),
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="event_idempotency_key",
            ),
        ]
        indexes = [
            # The sealer's batch query: WHERE txid >= horizon AND txid < xmin.
            models.Index(fields=["txid"], name="event_txid"),
            # A market's price at a moment (ledger.market_history): WHERE type IN (…) AND
            # stream = ? AND recorded_at < ? ORDER BY recorded_at DESC LIMIT 1, one probe.
            # Partial: the markets' events are a sliver of the log, and no other event pays
            # for an entry in it.
            models.Index(
                fields=["stream", "recorded_at"],
                name="event_spot_recent",
                condition=models.Q(type__in=SPOT_EVENT_TYPES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stream}@{self.version} {self.type}"


class SealBatch(AppendOnlyModel):
    """One sealing pass: everything below its horizon is sealed, in id order within the pass."""

    id = models.BigAutoField(primary_key=True)
    # Every event whose txid < horizon_txid is sealed by this or an earlier batch.
    horizon_txid = models.BigIntegerField(null=True, blank=True)
    first_seq = models.BigIntegerField(null=True, blank=True)
    last_seq = models.BigIntegerField(null=True, blank=True)
    count = models.PositiveIntegerField(default=0)
    head_hash = models.CharField(max_length=64)
    sealed_at = models.DateTimeField(default=timezone.now)
    # The ledger key's signature of the head (ledger.seal_signing), and which key made it. Both
    # blank on batches sealed before seals were signed.
    key_id = models.CharField(max_length=16, blank=True)
    signature = models.CharField(max_length=88, blank=True)

    def __str__(self) -> str:
        return f"seal batch {self.id} ({self.count} events, head {self.head_hash[:12]})"


class EventSeal(AppendOnlyModel):
    """An event's link in the hash chain: hash = sha256(previous hash || canonical event)."""

    seq = models.BigIntegerField(primary_key=True)
    event = models.OneToOneField(Event, on_delete=models.PROTECT, related_name="seal")
    batch = models.ForeignKey(SealBatch, on_delete=models.PROTECT, related_name="seals")
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"#{self.seq} {self.hash[:12]}"


class AccountKind(models.TextChoices):
    AVAILABLE = "available", "submitter available"
    HELD = "held", "submitter held"
    EARNINGS = "earnings", "operator earnings"
    REVENUE = "revenue", "platform revenue"
    CASHOUT = "cashout", "cashout clearing"
    FUNDING = "funding", "external funding"
    PAYOUTS = "payouts", "external payouts"
    TEST = "test", "test"


class Account(models.Model):
    """A balance in the books: a projection of its postings.

    `projected=False` accounts (platform revenue, the external accounts) keep no balance column:
    every settlement credits revenue, and one row updated by every settlement would serialise
    them all. Their balance is the sum of their postings.
    """

    code = models.CharField(max_length=128, unique=True)
    kind = models.CharField(max_length=16, choices=AccountKind.choices)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_accounts",
    )
    currency = models.CharField(max_length=3, default=CREDITS)
    balance = models.BigIntegerField(default=0)
    allow_negative = models.BooleanField(default=False)
    projected = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            # The last line of defence behind the guarded UPDATE in ledger.books.
            models.CheckConstraint(
                condition=Q(allow_negative=True) | Q(balance__gte=0),
                name="account_balance_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(projected=True) | Q(balance=0),
                name="account_unprojected_zero",
            ),
        ]

    def __str__(self) -> str:
        return self.code


class Entry(AppendOnlyModel):
    """A balanced set of postings, recorded by exactly one event."""

    id = models.BigAutoField(primary_key=True)
    event = models.OneToOneField(Event, on_delete=models.PROTECT, related_name="entry")
    kind = models.CharField(max_length=32)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return f"entry {self.id} ({self.kind})"


class Posting(AppendOnlyModel):
    id = models.BigAutoField(primary_key=True)
    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="postings")
    # Indexed by posting_account_id (account, id), which leads with it.
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="postings", db_index=False
    )
    amount = models.BigIntegerField()
    currency = models.CharField(max_length=3, default=CREDITS)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(amount=0), name="posting_amount_nonzero"),
        ]
        indexes = [models.Index(fields=["account", "id"], name="posting_account_id")]

    def __str__(self) -> str:
        return f"{self.account_id} {self.amount:+d} {self.currency}"


# The economy's tables live in their own modules; importing them here registers them with the app.
from ledger.models_cashouts import Cashout, CashoutExport, CashoutExportLine  # noqa: E402
from ledger.models_pricing import (  # noqa: E402
    PriceBook,
    PriceRule,
    RuleKind,
    SpotPrice,
    spot_stream,
)

__all__ = [
    "CREDITS",
    "Account",
    "AccountKind",
    "AppendOnlyModel",
    "Cashout",
    "CashoutExport",
    "CashoutExportLine",
    "Entry",
    "Event",
    "EventSeal",
    "Posting",
    "PriceBook",
    "PriceRule",
    "RuleKind",
    "SealBatch",
    "SpotPrice",
    "spot_stream",
]
