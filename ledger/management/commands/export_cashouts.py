import json
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date, parse_datetime

from core.errors import DomainError
from ledger.exports import cashout_export_create, export_csv_chunks, export_head
from ledger.models_cashouts import CashoutExport


def _moment(text: str) -> datetime:
    when = parse_datetime(text)
    if when is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"{text!r} is not a date (YYYY-MM-DD) or an ISO datetime")
        when = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


class Command(BaseCommand):
    help = (
        "Export approved and paid cashouts approved in [--from, --to) that no earlier export "
        "holds, as CSV (each export is an event with the file's sha256). --export N writes an "
        "existing export again, byte for byte. --head FILE writes the export's signed chain "
        "head, for verify_ledger --against: keep it with the CSV."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="period_from", help="YYYY-MM-DD or ISO datetime (UTC)")
        parser.add_argument("--to", dest="period_to", help="YYYY-MM-DD or ISO datetime, exclusive")
        parser.add_argument("--export", type=int, help="write an existing export again")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")
        parser.add_argument("--head", help="file to write the export's head (JSON) to")
        parser.add_argument("--actor", default="manage.py export_cashouts")

    def handle(self, *args, **options):
        if options["export"] is not None:
            export = CashoutExport.objects.filter(pk=options["export"]).first()
            if export is None:
                raise CommandError(f"no export {options['export']}")
        else:
            if not options["period_from"] or not options["period_to"]:
                raise CommandError("give --from and --to (or --export N)")
            try:
                export = cashout_export_create(
                    period_from=_moment(options["period_from"]),
                    period_to=_moment(options["period_to"]),
                    actor=options["actor"],
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from None
        if options["output"]:
            with open(options["output"], "wb") as out:
                for chunk in export_csv_chunks(export):
                    out.write(chunk)
        else:
            for chunk in export_csv_chunks(export):
                self.stdout.write(chunk.decode(), ending="")
        if options["head"]:
            with open(options["head"], "w", encoding="utf-8") as out:
                json.dump(export_head(export), out, indent=2, sort_keys=True)
                out.write("\n")
        self.stderr.write(
            f"export {export.pk}: {export.count} cashout(s), sha256 {export.sha256}, "
            f"chain head {export.chain_head[:16]}"
        )
