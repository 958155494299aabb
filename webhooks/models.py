"""Completion webhooks: the URL a job names, its submitter's signing secret, and one delivery
per job end with a row for every attempt at it.

A delivery moves `pending → sending → succeeded | failed`, and from `sending` back to `pending`
for a retry after a backoff; a redelivery moves an ended one back to `pending`. Each move is a
compare-and-set (webhooks.services), so a message delivered twice sends once.
"""

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret


def new_signing_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


class SigningSecret(models.Model):
    """A submitter's secret, which every webhook of their jobs is signed with. Kept as it is
    (an HMAC needs it); shown only to its owner."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="webhook_secret",
    )
    secret = models.CharField(max_length=64, default=new_signing_secret)
    # The secret before the last rotation, which also signs until WEBHOOK_SECRET_OVERLAP_S
    # after it, so that a receiver can switch without losing a delivery.
    previous = models.CharField(max_length=64, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"webhook secret of user {self.user_id}"


class JobWebhook(models.Model):
    """The URL a job named at submission, written in the submission's transaction."""

    job = models.OneToOneField(
        "jobs.Job", on_delete=models.PROTECT, primary_key=True, related_name="webhook"
    )
    url = models.CharField(max_length=2000)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"webhook of job {self.job_id}"


class DeliveryState(models.TextChoices):
    PENDING = "pending"  # due at next_attempt_at
    SENDING = "sending"  # an attempt is under way, until lease_until
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # every allowed attempt failed, or the URL was refused


class WebhookDelivery(models.Model):
    """The one delivery of a job's end (the unique webhook), opened in the transaction that
    ended the job."""

    webhook = models.OneToOneField(JobWebhook, on_delete=models.PROTECT, related_name="delivery")
    job_state = models.CharField(max_length=16)  # the state the job ended in
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    # Attempts after which it fails: WEBHOOK_MAX_ATTEMPTS, raised by that much per redelivery.
    attempts_allowed = models.PositiveIntegerField()
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # A worker that died mid-attempt leaves `sending`; after this the delivery is due again.
    lease_until = models.DateTimeField(null=True, blank=True)
    # The JSON sent, built at the first attempt and sent unchanged by every later one.
    body = models.TextField(blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The sweep: WHERE state IN ('pending','sending') ORDER BY next_attempt_at.
            models.Index(
                fields=["next_attempt_at"],
                name="webhook_delivery_due",
                condition=Q(state__in=["pending", "sending"]),
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of job {self.webhook_id} ({self.state})"

    @property
    def job_id(self) -> int:
        return self.webhook_id


class DeliveryAttempt(models.Model):
    """One POST: when, how long, and what came back (a status, or why none did)."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    response_excerpt = models.CharField(max_length=512, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="delivery_attempt_number")
        ]
        ordering = ["number"]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
