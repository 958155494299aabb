"""Completion webhooks: attached at submission, opened when the job ends, sent by the worker.

The job's end writes one row (the delivery, `delivery_open`) in its own transaction and asks
the worker for it only once that commits, so a webhook can neither hold up nor roll back the
end of a job. Each attempt is taken by a compare-and-set (`pending` and due, or `sending` past
its lease → `sending`), sent with no transaction open, and recorded with the delivery's next
state: a second message for the same delivery (a double fire, a sweep) finds nothing to take,
and one that succeeded is never sent again.
"""

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from core import outbound
from core.sql import statement
from jobs.models import Job
from webhooks.errors import NotRedeliverable
from webhooks.models import DeliveryAttempt, DeliveryState, JobWebhook, WebhookDelivery
from webhooks.payloads import job_finished_body
from webhooks.signing import delivery_headers, secret_ensure

log = logging.getLogger(__name__)

# A retry's message may arrive a little before its time (clocks of worker and database).
_EARLY = timedelta(milliseconds=500)
SWEEP_BATCH = 500


def webhook_attach(job: Job, data: dict[str, Any]) -> None:
    """The submission's hook (jobs.hooks): keep the job's URL, and make sure its submitter has
    a secret to verify deliveries with."""
    url = data.get("webhook_url")
    if not url:
        return
    JobWebhook.objects.create(job=job, url=url)
    secret_ensure(user_id=job.submitter_id)


def delivery_open(job_id: int, job_state: str) -> None:
    """The job's end (jobs.hooks): open its delivery, if it named a webhook, and have the worker
    send it once the end commits. One statement (webhooks/sql/delivery_open.sql)."""
    with connection.cursor() as cursor:
        cursor.execute(
            statement("webhooks", "delivery_open"),
            {
                "job": job_id,
                "job_state": job_state,
                "allowed": settings.WEBHOOK_MAX_ATTEMPTS,
                "now": timezone.now(),
            },
        )
        row = cursor.fetchone()
    if row is not None:
        delivery_enqueue_on_commit(row[0])


def delivery_enqueue_on_commit(delivery_id: int) -> None:
    """Ask the worker for the delivery after the caller commits. A broker that refuses is
    logged, never raised into the caller's finished work: the sweep sends it later."""

    def enqueue() -> None:
        from webhooks.tasks import deliver

        deliver.delay(delivery_id)

    transaction.on_commit(enqueue, robust=True)


def backoff_s(attempt: int) -> int:
    """Seconds to wait after failed attempt number `attempt` (1, 2, …)."""
    return min(settings.WEBHOOK_BACKOFF_S * 2 ** (attempt - 1), settings.WEBHOOK_BACKOFF_MAX_S)


def _lease() -> timedelta:
    # Connecting and each read wait at most the timeout; a worker still at it after this long
    # is gone, and another may take the delivery.
    return timedelta(seconds=4 * settings.WEBHOOK_TIMEOUT_S + 30)


def delivery_attempt(*, delivery_id: int) -> int | None:
    """Make the delivery's next attempt, if it is due and no one else is making it. Returns the
    seconds until the next attempt when this one failed and another is allowed, else None."""
    now = timezone.now()
    due = Q(state=DeliveryState.PENDING, next_attempt_at__lte=now + _EARLY) | Q(
        state=DeliveryState.SENDING, lease_until__lt=now
    )
    allowed = Q(attempts__lt=F("attempts_allowed"))
    taken = WebhookDelivery.objects.filter(due, allowed, pk=delivery_id).update(
        state=DeliveryState.SENDING, attempts=F("attempts") + 1, lease_until=now + _lease()
    )
    if not taken:
        return None
    delivery = WebhookDelivery.objects.select_related("webhook__job").get(pk=delivery_id)
    if not delivery.body:
        delivery.body = job_finished_body(delivery)
        WebhookDelivery.objects.filter(pk=delivery_id, body="").update(body=delivery.body)
    return _send(delivery)


def _send(delivery: WebhookDelivery) -> int | None:
    body = delivery.body.encode()
    secret = secret_ensure(user_id=delivery.webhook.job.submitter_id)
    headers = delivery_headers(
        body=body, secret=secret, delivery_id=delivery.pk, timestamp=int(time.time())
    )
    started = timezone.now()
    clock = time.monotonic()
    answer: outbound.Answer | None = None
    refused = False
    try:
        answer = outbound.post(
            delivery.webhook.url,
            body,
            headers,
            timeout_s=settings.WEBHOOK_TIMEOUT_S,
            allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
        )
        error = "" if 200 <= answer.status < 300 else f"answered {answer.status}"
    except outbound.OutboundRefused as exc:
        refused, error = True, f"refused: {exc}"
    except (OSError, ValueError) as exc:  # no answer; ValueError: a URL http.client refuses
        error = f"{type(exc).__name__}: {exc}"
    return _record(
        delivery,
        started=started,
        duration_ms=int((time.monotonic() - clock) * 1000),
        answer=answer,
        error=error,
        refused=refused,
    )


def _next_state(
    delivery: WebhookDelivery, ok: bool, refused: bool, now: datetime
) -> dict[str, Any]:
    if ok:
        return {"state": DeliveryState.SUCCEEDED, "delivered_at": now}
    if refused or delivery.attempts >= delivery.attempts_allowed:
        return {"state": DeliveryState.FAILED}
    return {
        "state": DeliveryState.PENDING,
        "next_attempt_at": now + timedelta(seconds=backoff_s(delivery.attempts)),
    }


def _record(
    delivery: WebhookDelivery,
    *,
    started: datetime,
    duration_ms: int,
    answer: outbound.Answer | None,
    error: str,
    refused: bool,
) -> int | None:
    """The attempt's row and the delivery's next state, together. The move is made only while
    the attempt still holds the delivery (its number): a worker that outlived its lease records
    what it did and moves nothing."""
    status = answer.status if answer is not None else None
    ok = status is not None and 200 <= status < 300
    now = timezone.now()
    changes = _next_state(delivery, ok, refused, now)
    with transaction.atomic():
        moved = WebhookDelivery.objects.filter(
            pk=delivery.pk, state=DeliveryState.SENDING, attempts=delivery.attempts
        ).update(lease_until=None, last_status_code=status, **changes)
        DeliveryAttempt.objects.create(
            delivery=delivery,
            number=delivery.attempts,
            started_at=started,
            duration_ms=duration_ms,
            status_code=status,
            error=error[:500],
            response_excerpt=(answer.excerpt if answer is not None else "")[:512],
        )
    if not ok:
        log.info("webhook delivery %s attempt %s: %s", delivery.pk, delivery.attempts, error)
    if moved and changes["state"] == DeliveryState.PENDING:
        return backoff_s(delivery.attempts)
    return None


def delivery_redeliver(*, job_id: int) -> WebhookDelivery:
    """Send an ended delivery again, with a fresh allowance of attempts. NotRedeliverable while
    the job runs or its delivery is still under way."""
    with transaction.atomic():
        moved = WebhookDelivery.objects.filter(
            webhook_id=job_id, state__in=[DeliveryState.SUCCEEDED, DeliveryState.FAILED]
        ).update(
            state=DeliveryState.PENDING,
            next_attempt_at=timezone.now(),
            attempts_allowed=F("attempts") + settings.WEBHOOK_MAX_ATTEMPTS,
        )
        delivery = WebhookDelivery.objects.filter(webhook_id=job_id).first()
        if delivery is None:
            raise NotRedeliverable("the job has not ended: there is nothing to deliver yet")
        if not moved:
            raise NotRedeliverable(f"a delivery is already under way ({delivery.state})")
        delivery_enqueue_on_commit(delivery.pk)
    return delivery


def deliveries_sweep() -> int:
    """Beat's pass: ask the worker again for deliveries due for longer than a sweep interval
    (their message lost with a broker outage or a worker's crash) and for those whose attempt
    outlived its lease. Sending stays the compare-and-set's: a delivery asked for twice is
    sent once."""
    now = timezone.now()
    # A worker that died in the last allowed attempt: nothing more may be tried.
    WebhookDelivery.objects.filter(
        state=DeliveryState.SENDING, lease_until__lt=now, attempts__gte=F("attempts_allowed")
    ).update(state=DeliveryState.FAILED, lease_until=None)
    late = now - timedelta(seconds=settings.WEBHOOK_SWEEP_INTERVAL_S)
    due = WebhookDelivery.objects.filter(
        Q(state=DeliveryState.PENDING, next_attempt_at__lte=late)
        | Q(state=DeliveryState.SENDING, lease_until__lt=now)
    )
    ids = list(due.order_by("next_attempt_at").values_list("pk", flat=True)[:SWEEP_BATCH])
    for delivery_id in ids:
        delivery_enqueue_on_commit(delivery_id)
    return len(ids)
