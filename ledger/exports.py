"""Finance exports: a CSV of approved and paid cashouts for a period, each cashout exported once.

Making an export snapshots the cashouts into export lines, hashes the CSV those lines give,
and appends a CashoutsExported event with the range, count, totals, sha256 and the hash chain's
head, all in one transaction. The CSV is always generated from the lines, never from the live
cashouts, so downloading it again gives the same bytes (a cashout paid after its export still
reads as it stood). The file is streamed in chunks: constant memory for any size.
"""

import csv
import hashlib
import io
from collections.abc import Iterator
from datetime import UTC, datetime

from django.db import connection, transaction

from ledger.canonical import canonical_json
from ledger.chain import chain_head
from ledger.errors import DomainError
from ledger.models_cashouts import Cashout, CashoutExport, CashoutExportLine, CashoutStatus
from ledger.quotes import format_minor, format_paise, minor_to_paise
from ledger.services import event_append

COLUMNS = [
    "export_id",
    "line",
    "cashout_id",
    "operator_id",
    "operator",
    "status",
    "payout_method",
    "payout_details",
    "credits",
    "fee_credits",
    "net_credits",
    "inr",
    "fee_inr",
    "paise_per_credit",
    "approved_at",
    "paid_at",
    "payout_reference",
]
_CHUNK = 500
# pg_advisory_xact_lock key: exports are made one at a time, so two never pick the same cashout.
_EXPORT_LOCK_KEY = 0xE4B0


class NothingToExport(DomainError):
    code = "nothing_to_export"
    http_status = 409


def _stamp(when: datetime | None) -> str:
    return when.astimezone(UTC).isoformat() if when else ""


def _row(export_id: int, line: CashoutExportLine) -> list[str]:
    rate = line.paise_per_credit
    return [
        str(export_id),
        str(line.position),
        str(line.cashout_id),
        str(line.operator_id_at_export),
        line.operator_name,
        line.status,
        str(line.payout_details.get("method", "")),
        canonical_json(line.payout_details).decode(),
        format_minor(line.amount_minor),
        format_minor(line.fee_minor),
        format_minor(line.amount_minor - line.fee_minor),
        format_paise(line.inr_paise),
        format_paise(minor_to_paise(line.fee_minor, paise_per_credit=rate)),
        str(rate),
        _stamp(line.approved_at),
        _stamp(line.paid_at),
        line.payout_reference,
    ]


def export_csv_chunks(export: CashoutExport) -> Iterator[bytes]:
    """The export's CSV, in chunks of a few hundred lines, from its lines in position order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    lines = CashoutExportLine.objects.filter(export_id=export.pk).order_by("position")
    for n, line in enumerate(lines.iterator(chunk_size=_CHUNK), start=1):
        writer.writerow(_row(export.pk, line))
        if n % _CHUNK == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def export_sha256(export: CashoutExport) -> str:
    digest = hashlib.sha256()
    for chunk in export_csv_chunks(export):
        digest.update(chunk)
    return digest.hexdigest()


def cashout_export_create(
    *,
    period_from: datetime,
    period_to: datetime,
    actor: str,
    cashout_ids: list[int] | None = None,
) -> CashoutExport:
    """Export every approved or paid cashout approved in [period_from, period_to) and not yet
    exported (optionally only those in `cashout_ids`). Nothing to export is a 409."""
    for name, when in (("from", period_from), ("to", period_to)):
        if when.tzinfo is None:
            raise DomainError(f"{name} must carry a timezone", fields={name: ["timezone-aware"]})
    if period_from >= period_to:
        raise DomainError("the period is empty: from must be before to", fields={"to": ["> from"]})
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_EXPORT_LOCK_KEY])
        # Read after the lock: a fresh snapshot that sees every earlier export's lines.
        candidates = Cashout.objects.filter(
            status__in=[CashoutStatus.APPROVED, CashoutStatus.PAID],
            approved_at__gte=period_from,
            approved_at__lt=period_to,
            export_line__isnull=True,
        )
        if cashout_ids is not None:
            candidates = candidates.filter(pk__in=cashout_ids)
        candidates = candidates.select_related("operator").order_by("approved_at", "id")
        if not candidates.exists():
            raise NothingToExport("no approved or paid cashout in that period is left to export")
        export = CashoutExport.objects.create(
            period_from=period_from, period_to=period_to, created_by=actor
        )
        ids: list[int] = []
        totals = {"amount": 0, "fee": 0, "inr": 0}
        batch: list[CashoutExportLine] = []
        for position, cashout in enumerate(candidates.iterator(chunk_size=_CHUNK), start=1):
            ids.append(cashout.pk)
            totals["amount"] += cashout.amount_minor
            totals["fee"] += cashout.fee_minor
            totals["inr"] += cashout.inr_paise
            batch.append(
                CashoutExportLine(
                    export=export,
                    cashout=cashout,
                    position=position,
                    operator_id_at_export=cashout.operator_id,
                    operator_name=cashout.operator.get_username(),
                    status=cashout.status,
                    payout_details=cashout.payout_details,
                    amount_minor=cashout.amount_minor,
                    fee_minor=cashout.fee_minor,
                    inr_paise=cashout.inr_paise,
                    paise_per_credit=cashout.paise_per_credit,
                    approved_at=cashout.approved_at,
                    paid_at=cashout.paid_at,
                    payout_reference=cashout.payout_reference,
                )
            )
            if len(batch) == _CHUNK:
                CashoutExportLine.objects.bulk_create(batch)
                batch = []
        CashoutExportLine.objects.bulk_create(batch)
        digest = export_sha256(export)
        head = chain_head()
        CashoutExport.objects.filter(pk=export.pk, sha256="").update(
            count=len(ids),
            total_amount_minor=totals["amount"],
            total_fee_minor=totals["fee"],
            total_inr_paise=totals["inr"],
            sha256=digest,
            chain_head=head,
        )
        event_append(
            stream=f"export:{export.pk}",
            type="CashoutsExported",
            actor=actor,
            expected_version=0,
            payload={
                "export_id": export.pk,
                "period_from": _stamp(period_from),
                "period_to": _stamp(period_to),
                "count": len(ids),
                "total_amount_minor": totals["amount"],
                "total_fee_minor": totals["fee"],
                "total_inr_paise": totals["inr"],
                "sha256": digest,
                "chain_head": head,
                "cashout_ids": ids,
            },
        )
        export.refresh_from_db()
        return export
