from django.core.management.base import BaseCommand

from ledger.chain import chain_seal


class Command(BaseCommand):
    help = "Seal every committed event into the hash chain now (beat does this every few seconds)."

    def handle(self, *args, **options):
        total = 0
        while True:
            result = chain_seal()
            total += result.sealed
            if result.sealed == 0:
                break
        self.stdout.write(f"sealed {total} event(s); head {result.head[:16]}")
