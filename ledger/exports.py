"""Finance exports: a CSV of approved and paid cashouts for a period, each cashout exported once.

Making an export snapshots the cashouts into export lines (read as values, stored a batch at a
time: COPY on PostgreSQL), hashes the CSV those lines give as it writes them, and appends a
CashoutsExported event with the range, count, totals, sha256 and the hash chain's head, all in
one transaction. The CSV is always generated from the lines, never from the live cashouts, so
downloading it again gives the same bytes (a cashout paid after its export still reads as it
stood). The file is streamed in chunks: constant memory for any size.

The export's head (`export_head`) is that chain head as the ledger's key signed it: kept with
the CSV, outside the database, it lets `verify_ledger --against` show that the log still holds
the history it vouches for (ledger.against).
"""

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from core.errors import DomainError
from ledger.canonical import canonical_json
from ledger.chain import GENESIS, last_batch, signed_head
from ledger.models import EventSeal, SealBatch
from ledger.models_cashouts import Cashout, CashoutExport, CashoutExportLine, CashoutStatus
from ledger.quotes import format_minor, format_paise, minor_to_paise
from ledger.seal_signing import head_as_json
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
# Cashouts read (one fetch of the server-side cursor) and lines written (one COPY) at a time.
_BATCH = 5000
# pg_advisory_xact_lock key: exports are made one at a time, so two never pick the same cashout.
_EXPORT_LOCK_KEY = 0xE4B0


class NothingToExport(DomainError):
    code = "nothing_to_export"
    http_status = 409


def _stamp(when: datetime | None) -> str:
    return when.astimezone(UTC).isoformat() if when else ""


class _Line(NamedTuple):
    """A line's fields (the line table's columns after export_id), what its CSV row is written
    from, whether they come from the cashouts (making the export) or from the stored lines
    (downloading it): the two give the same bytes."""

    cashout_id: int
    position: int
    operator_id_at_export: int
    operator_name: str
    status: str
    payout_details: dict[str, Any]
    amount_minor: int
    fee_minor: int
    inr_paise: int
    paise_per_credit: int
    approved_at: datetime
    paid_at: datetime | None
    payout_reference: str


_LINE_FIELDS = _Line._fields


def _row(export_id: int, line: _Line) -> list[str]:
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


def _csv_chunks(export_id: int, lines: Iterable[_Line]) -> Iterator[bytes]:
    """The CSV of `lines` (in position order), in chunks of a few hundred lines."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for n, line in enumerate(lines, start=1):
        writer.writerow(_row(export_id, line))
        if n % _CHUNK == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def export_csv_chunks(export: CashoutExport) -> Iterator[bytes]:
    """The export's CSV, in chunks of a few hundred lines, from its lines in position order."""
    lines = (
        CashoutExportLine.objects.filter(export_id=export.pk)
        .order_by("position")
        .values_list(*_LINE_FIELDS)
        .iterator(chunk_size=_CHUNK)
    )
    return _csv_chunks(export.pk, (_Line(*values) for values in lines))


def export_sha256(export: CashoutExport) -> str:
    digest = hashlib.sha256()
    for chunk in export_csv_chunks(export):
        digest.update(chunk)
    return digest.hexdigest()


def _lines_write(export_id: int, lines: list[_Line]) -> None:
    """Store a batch of an export's lines with one COPY."""
    meta = CashoutExportLine._meta
    columns = ", ".join(meta.get_field(name).column for name in ("export", *_LINE_FIELDS))
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(f"COPY {meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for line in lines:
            # JSONField's own form of the value: json.dumps, no encoder.
            details = json.dumps(line.payout_details)
            copy.write_row((export_id, *line._replace(payout_details=details)))


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
        username = get_user_model().USERNAME_FIELD
        # A line's fields from status on have the cashout's names.
        candidates = candidates.order_by("approved_at", "id").values_list(
            "id", "operator_id", f"operator__{username}", *_LINE_FIELDS[4:]
        )
        if not candidates.exists():
            raise NothingToExport("no approved or paid cashout in that period is left to export")
        export = CashoutExport.objects.create(
            period_from=period_from, period_to=period_to, created_by=actor
        )
        ids: list[int] = []
        totals = {"amount": 0, "fee": 0, "inr": 0}

        def lines() -> Iterator[_Line]:
            batch: list[_Line] = []
            rows = candidates.iterator(chunk_size=_BATCH)
            for position, (cashout_id, *fields) in enumerate(rows, start=1):
                line = _Line(cashout_id, position, *fields)
                ids.append(cashout_id)
                totals["amount"] += line.amount_minor
                totals["fee"] += line.fee_minor
                totals["inr"] += line.inr_paise
                batch.append(line)
                yield line
                if len(batch) == _BATCH:
                    # Between two fetches of the server-side cursor, never during one.
                    _lines_write(export.pk, batch)
                    batch = []
            if batch:
                _lines_write(export.pk, batch)

        # The lines and the CSV's hash in one pass: a download writes the CSV from the stored
        # lines, which hold exactly these values, so it hashes to the same digest.
        digest = hashlib.sha256()
        for chunk in _csv_chunks(export.pk, lines()):
            digest.update(chunk)
        sha256 = digest.hexdigest()
        sealed = last_batch()
        head = sealed.head_hash if sealed else GENESIS
        chain_seq = sealed.last_seq if sealed else None
        CashoutExport.objects.filter(pk=export.pk, sha256="").update(
            count=len(ids),
            total_amount_minor=totals["amount"],
            total_fee_minor=totals["fee"],
            total_inr_paise=totals["inr"],
            sha256=sha256,
            chain_head=head,
            chain_seq=chain_seq,
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
                "sha256": sha256,
                "chain_head": head,
                "chain_seq": chain_seq,
                "cashout_ids": ids,
            },
        )
        export.refresh_from_db()
        return export


def export_head(export: CashoutExport) -> dict[str, Any]:
    """The export's head file: its id and CSV sha256, and the seal batch that was the chain's
    head when it was made, with that batch's signature (`chain` is None when nothing was sealed
    then, or the batch predates signing)."""
    batch = None
    if export.chain_seq is not None:
        batch = SealBatch.objects.filter(last_seq=export.chain_seq).order_by("-id").first()
    chain = None
    if batch is not None and batch.signature:
        last_event = EventSeal.objects.filter(seq=batch.last_seq).values_list("event_id", flat=True)
        chain = head_as_json(
            signed_head(batch),
            batch.signature,
            batch_id=batch.pk,
            last_event_id=last_event.first(),
            sealed_at=_stamp(batch.sealed_at),
        )
    return {"export_id": export.pk, "sha256": export.sha256, "count": export.count, "chain": chain}
