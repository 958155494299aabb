from celery import shared_task
from django.conf import settings

from core.alerts import alert
from ledger import metrics
from ledger.chain import chain_seal
from ledger.verify import verify_ledger

# Enough of a failed verification's differences for an admin to start from; the rest are one
# `manage.py verify_ledger` away.
_PROBLEMS_MAILED = 50


@shared_task(name="ledger.seal_chain", ignore_result=True)
def seal_chain() -> int:
    """Seal new events into the hash chain; a double fire seals nothing twice."""
    return chain_seal(limit=settings.LEDGER_SEAL_BATCH).sealed


@shared_task(name="ledger.verify", ignore_result=True)
def verify() -> bool:
    """The nightly `verify_ledger`; a failure (or a crash) alerts the admins. Reads only, so a
    double fire checks twice and changes nothing."""
    try:
        report = verify_ledger(check_chain=True)
    except Exception as exc:
        metrics.VERIFICATIONS.labels("error").inc()
        alert(
            "verify_ledger_failed",
            "verify_ledger could not run",
            f"The scheduled verify_ledger stopped with {type(exc).__name__}: {exc}\n\n"
            "Run `manage.py verify_ledger` to see it again.",
        )
        raise
    metrics.VERIFICATIONS.labels("ok" if report.ok else "failed").inc()
    if not report.ok:
        shown = report.problems[:_PROBLEMS_MAILED]
        more = len(report.problems) - len(shown)
        alert(
            "verify_ledger_failed",
            f"verify_ledger found {len(report.problems)} difference(s)",
            f"The scheduled verify_ledger replayed {report.events} events and found "
            f"{len(report.problems)} difference(s):\n\n"
            + "\n".join(f"- {problem}" for problem in shown)
            + (f"\n… and {more} more: run `manage.py verify_ledger`." if more else ""),
        )
    return report.ok
