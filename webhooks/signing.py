"""Submitters' signing secrets, and the headers a delivery is signed with.

`ComputePool-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`
(core.signatures, as Stripe signs), one `v1` per secret in force: the current one, and the
previous one for WEBHOOK_SECRET_OVERLAP_S after a rotation. docs/api.md shows a receiver's check.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.signatures import signature_header
from webhooks.models import SigningSecret, new_signing_secret

SIGNATURE_HEADER = "ComputePool-Signature"
DELIVERY_HEADER = "ComputePool-Delivery"
EVENT_HEADER = "ComputePool-Event"


def secret_ensure(*, user_id: int) -> SigningSecret:
    """The submitter's secret, made on first use."""
    secret, _ = SigningSecret.objects.get_or_create(user_id=user_id)
    return secret


def secret_rotate(*, user_id: int) -> SigningSecret:
    """A new secret; the one it replaces keeps signing for the overlap (a rotation inside the
    overlap drops the oldest)."""
    with transaction.atomic():
        secret_ensure(user_id=user_id)
        secret = SigningSecret.objects.select_for_update().get(user_id=user_id)
        secret.previous, secret.secret = secret.secret, new_signing_secret()
        secret.rotated_at = timezone.now()
        secret.save(update_fields=["previous", "secret", "rotated_at"])
    return secret


def secrets_in_force(secret: SigningSecret) -> list[str]:
    overlap = timedelta(seconds=settings.WEBHOOK_SECRET_OVERLAP_S)
    if secret.previous and secret.rotated_at and timezone.now() < secret.rotated_at + overlap:
        return [secret.secret, secret.previous]
    return [secret.secret]


def delivery_headers(
    *, body: bytes, secret: SigningSecret, delivery_id: int, timestamp: int
) -> dict[str, str]:
    return {
        SIGNATURE_HEADER: signature_header(
            body, secrets=secrets_in_force(secret), timestamp=timestamp
        ),
        DELIVERY_HEADER: str(delivery_id),
        EVENT_HEADER: "job.finished",
    }
