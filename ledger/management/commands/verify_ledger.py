import json

from django.core.management.base import BaseCommand, CommandError

from ledger.chain import chain_head
from ledger.verify import print_progress, verify_ledger


def _head_file(path: str) -> tuple[str, object]:
    try:
        with open(path, encoding="utf-8") as handle:
            return path, json.load(handle)
    except (OSError, ValueError) as exc:
        raise CommandError(f"--against {path}: {exc}") from None


class Command(BaseCommand):
    help = (
        "Recompute the hash chain and check each seal batch's signature, check every payload "
        "against its postings, replay every event into fresh projections, diff them against "
        "the live tables and check the books. With --against, also check that the log still "
        "holds the history an export's signed head vouches for. Exits non-zero naming each "
        "difference."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-chain", action="store_true", help="skip the hash-chain check")
        parser.add_argument(
            "--against",
            action="append",
            default=[],
            metavar="HEAD_FILE",
            help="an export's head file (export_cashouts --head, or the export's `head` in the "
            "API); may be given more than once",
        )

    def handle(self, *args, **options):
        against = [_head_file(path) for path in options["against"]]
        report = verify_ledger(
            check_chain=not options["no_chain"], progress=print_progress, against=against
        )
        for note in report.notes:
            self.stderr.write(f"NOTE {note}")
        if not report.ok:
            for problem in report.problems:
                self.stderr.write(f"DIFFERS {problem}")
            raise CommandError(
                f"ledger verification failed: {len(report.problems)} difference(s) "
                f"over {report.events} events"
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"ledger OK: {report.events} events replayed, payloads agree with their "
                f"postings, projections match, books balance, chain head {chain_head()[:16]}"
                + (f", {len(against)} export head(s) hold" if against else "")
            )
        )
