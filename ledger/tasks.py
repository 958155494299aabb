from celery import shared_task
from django.conf import settings

from ledger.chain import chain_seal


@shared_task(name="ledger.seal_chain", ignore_result=True)
def seal_chain() -> int:
    """Seal new events into the hash chain; a double fire seals nothing twice."""
    return chain_seal(limit=settings.LEDGER_SEAL_BATCH).sealed
