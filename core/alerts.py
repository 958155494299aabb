"""Alerts to the hub's admins: a node quarantined, a blocked driver seen, many leases lost at
once, the nightly verify_ledger failing (docs/metrics.md, "Alerts").

`alert` is called where the thing happens, usually inside that change's transaction; it sends
nothing itself. Once the transaction commits, Celery tasks mail the admins (Django's mail
backend) and, when ALERT_WEBHOOK_URL is set, POST the alert there as JSON: a slow mail server
or webhook never holds a transaction or a request, a rolled-back change alerts nobody, and each
channel retries on its own (a webhook that is down does not send the mail twice).
"""

import logging

from django.conf import settings
from django.db import transaction

from core import tasks
from core.metrics import counter

log = logging.getLogger(__name__)

ALERTS = counter("computepool_alerts_total", "Alerts sent to the admins, by kind.", ["kind"])


def alert(kind: str, subject: str, body: str) -> None:
    """Tell the admins, after the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: _send(kind, subject, body), robust=True)


def _send(kind: str, subject: str, body: str) -> None:
    ALERTS.labels(kind).inc()
    try:
        tasks.alert_mail.delay(kind, subject, body)
        if settings.ALERT_WEBHOOK_URL:
            tasks.alert_webhook.delay(kind, subject, body)
    except Exception:  # the broker is down: the change stands, the log keeps the alert
        log.exception("could not queue the %s alert: %s\n%s", kind, subject, body)
