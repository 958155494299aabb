"""Cashouts and the finance exports that list them.

A cashout row is a projection of the events in its stream `cashout:<id>` (version = its
`version`), changed only by the services in ledger.cashouts with compare-and-set. Export lines
are snapshots taken when the export was made, so downloading it again gives the same bytes even
after a listed cashout is paid.
"""

from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ledger.errors import ImmutableRecord
from ledger.models import AppendOnlyModel


class CashoutStatus(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"
    REJECTED = "rejected"
    PAID = "paid"


class Cashout(models.Model):
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="cashouts"
    )
    status = models.CharField(
        max_length=16, choices=CashoutStatus.choices, default=CashoutStatus.REQUESTED
    )
    # Credits reserved from earnings (minor units); `fee_minor` of them go to the platform on
    # payment, the rest leave through external payouts as `inr_paise`.
    amount_minor = models.BigIntegerField()
    fee_minor = models.BigIntegerField(default=0)
    inr_paise = models.BigIntegerField()
    # The rules it was priced under, so it can be recomputed.
    book_version = models.PositiveIntegerField()
    paise_per_credit = models.PositiveIntegerField()
    # Where to pay. Kept on the row only: the event log is permanent, so it records a hash.
    payout_details = models.JSONField()
    payout_details_sha256 = models.CharField(max_length=64)
    version = models.PositiveIntegerField(default=1)
    requested_at = models.DateTimeField(default=timezone.now)
    approved_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=128, blank=True)
    reason = models.TextField(blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    payout_reference = models.CharField(max_length=128, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="cashout_amount_positive"),
            models.CheckConstraint(
                condition=Q(fee_minor__gte=0) & Q(fee_minor__lt=models.F("amount_minor")),
                name="cashout_fee_below_amount",
            ),
            models.CheckConstraint(condition=Q(inr_paise__gt=0), name="cashout_inr_positive"),
            models.CheckConstraint(
                condition=~Q(status=CashoutStatus.PAID)
                | (Q(paid_at__isnull=False) & ~Q(payout_reference="")),
                name="cashout_paid_has_reference",
            ),
            # One payout reference pays one cashout: a reused reference is a double payout.
            models.UniqueConstraint(
                fields=["payout_reference"],
                condition=~Q(payout_reference=""),
                name="cashout_payout_reference_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["operator", "id"], name="cashout_operator_id"),
            # The export's query: approved or paid, by approval time.
            models.Index(fields=["status", "approved_at"], name="cashout_status_approved"),
        ]

    def __str__(self) -> str:
        return f"cashout {self.pk} ({self.status}, {self.amount_minor})"

    @property
    def stream(self) -> str:
        return f"cashout:{self.pk}"

    @property
    def net_minor(self) -> int:
        return self.amount_minor - self.fee_minor


class CashoutExport(models.Model):
    """One finance export: which cashouts, their totals, and the sha256 of the CSV's bytes.

    Written once, in the transaction that appends its CashoutsExported event; the model refuses
    any later change (and a trigger does on PostgreSQL).
    """

    id = models.BigAutoField(primary_key=True)
    period_from = models.DateTimeField()
    period_to = models.DateTimeField()
    created_by = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)
    count = models.PositiveIntegerField(default=0)
    total_amount_minor = models.BigIntegerField(default=0)
    total_fee_minor = models.BigIntegerField(default=0)
    total_inr_paise = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    chain_head = models.CharField(max_length=64, blank=True)
    # The last seal at export time (the seal batch whose signed head is chain_head); null when
    # nothing was sealed yet.
    chain_seq = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(period_from__lt=models.F("period_to")), name="export_period_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"export {self.pk} ({self.count} cashouts)"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            stored = CashoutExport.objects.filter(pk=self.pk).values_list("sha256", flat=True)
            if any(stored):
                self._refuse()
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def _refuse(self) -> NoReturn:
        raise ImmutableRecord(f"export {self.pk} is sealed: make a new export instead")

    @property
    def filename(self) -> str:
        return f"cashouts-export-{self.pk}.csv"


class CashoutExportLine(AppendOnlyModel):
    """A cashout as it stood when exported. One line per cashout, ever (the unique key)."""

    id = models.BigAutoField(primary_key=True)
    export = models.ForeignKey(CashoutExport, on_delete=models.PROTECT, related_name="lines")
    cashout = models.OneToOneField(Cashout, on_delete=models.PROTECT, related_name="export_line")
    position = models.PositiveIntegerField()
    operator_id_at_export = models.BigIntegerField()
    operator_name = models.CharField(max_length=150)
    status = models.CharField(max_length=16)
    payout_details = models.JSONField()
    amount_minor = models.BigIntegerField()
    fee_minor = models.BigIntegerField()
    inr_paise = models.BigIntegerField()
    paise_per_credit = models.PositiveIntegerField()
    approved_at = models.DateTimeField()
    paid_at = models.DateTimeField(null=True, blank=True)
    payout_reference = models.CharField(max_length=128, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["export", "position"], name="exportline_position"),
        ]

    def __str__(self) -> str:
        return f"export {self.export_id} line {self.position}: cashout {self.cashout_id}"
