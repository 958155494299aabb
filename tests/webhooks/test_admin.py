"""Admins see every delivery with its attempts, and may ask for one again."""

import pytest
from django.urls import reverse

from tests.webhooks.conftest import succeeded_job
from webhooks.models import WebhookDelivery
from webhooks.services import delivery_attempt

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_a_delivery_shows_its_attempts_and_can_be_sent_again(
    client, dave, submitter, bob, loopback_allowed, settings
):
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    job_id = succeeded_job(submitter, bob, "http://127.0.0.1:9/nothing-listens")
    failed = WebhookDelivery.objects.get(webhook_id=job_id)
    assert delivery_attempt(delivery_id=failed.pk) is None
    client.force_login(dave)

    page = client.get(reverse("admin:webhooks_webhookdelivery_change", args=[failed.pk]))
    assert page.status_code == 200
    assert b"ConnectionRefusedError" in page.content  # the attempt's error, inline
    assert b"job.finished" in page.content  # the body that was sent

    changelist = reverse("admin:webhooks_webhookdelivery_changelist")
    asked = client.post(
        changelist, {"action": "redeliver", "_selected_action": [failed.pk]}, follow=True
    )
    assert b"Asked again for 1 delivery(ies)." in asked.content
    failed.refresh_from_db()
    assert failed.state == "pending" and failed.attempts_allowed == 2
    again = client.post(
        changelist, {"action": "redeliver", "_selected_action": [failed.pk]}, follow=True
    )
    assert b"already under way" in again.content
