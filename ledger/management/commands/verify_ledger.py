from django.core.management.base import BaseCommand, CommandError

from ledger.chain import chain_head
from ledger.verify import print_progress, verify_ledger


class Command(BaseCommand):
    help = (
        "Recompute the hash chain and check each seal batch's signature, check every payload "
        "against its postings, replay every event into fresh projections, diff them against "
        "the live tables and check the books. Exits non-zero naming each difference."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-chain", action="store_true", help="skip the hash-chain check")

    def handle(self, *args, **options):
        report = verify_ledger(check_chain=not options["no_chain"], progress=print_progress)
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
            )
        )
