"""Alert delivery (core.alerts): one task per channel, each retried on its own."""

import json
import urllib.request
from datetime import UTC, datetime
from urllib.error import URLError

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q

_RETRY = {"autoretry_for": (OSError, URLError), "retry_backoff": 30, "max_retries": 8}


def alert_recipients() -> list[str]:
    """ALERT_EMAILS when set; otherwise every active admin (staff, superuser or the admin role)
    with an address."""
    if settings.ALERT_EMAILS:
        return list(settings.ALERT_EMAILS)
    admins = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_staff=True) | Q(is_superuser=True) | Q(groups__name="admin"))
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    return sorted(admins)


def _subject(subject: str) -> str:
    return f"[ComputePool] {subject}"


@shared_task(name="core.alert_mail", ignore_result=True, **_RETRY)
def alert_mail(kind: str, subject: str, body: str) -> int:
    """Mail an alert to the admins; how many were mailed."""
    recipients = alert_recipients()
    if not recipients:
        return 0
    send_mail(_subject(subject), f"{body}\n\n(alert: {kind})", None, recipients)
    return len(recipients)


@shared_task(name="core.alert_webhook", ignore_result=True, **_RETRY)
def alert_webhook(kind: str, subject: str, body: str) -> int:
    """POST an alert to ALERT_WEBHOOK_URL as JSON; the receiver's status code."""
    payload = {
        "kind": kind,
        "subject": _subject(subject),
        "body": body,
        "sent_at": datetime.now(UTC).isoformat(),
    }
    request = urllib.request.Request(  # noqa: S310 - the URL is the admins' setting, http(s) only
        settings.ALERT_WEBHOOK_URL,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "computepool-alerts"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=settings.ALERT_WEBHOOK_TIMEOUT_S) as answer:  # noqa: S310
        return answer.status
