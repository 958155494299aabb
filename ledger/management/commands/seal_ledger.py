from django.core.management.base import BaseCommand

from ledger import seal_signing
from ledger.chain import chain_seal


class Command(BaseCommand):
    help = (
        "Seal every committed event into the hash chain now (beat does this every few seconds). "
        "--public-key prints the ledger signing key's id and public key instead (what "
        "LEDGER_VERIFY_KEYS takes once the key is retired)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--public-key", action="store_true", help="print the key, seal nothing")

    def handle(self, *args, **options):
        if options["public_key"]:
            self.stdout.write(f"{seal_signing.key_id()} {seal_signing.public_key_b64()}")
            return
        total = 0
        while True:
            result = chain_seal()
            total += result.sealed
            if result.sealed == 0:
                break
        self.stdout.write(
            f"sealed {total} event(s); head {result.head[:16]}, key {seal_signing.key_id()}"
        )
