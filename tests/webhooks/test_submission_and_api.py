"""Naming a webhook at submission (validated, written with the job), reading it back, and the
submitter's signing secret."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from core.signatures import signature_problem
from jobs.models import Job
from tests.jobs.conftest import job_body
from tests.webhooks.conftest import submit
from webhooks.models import JobWebhook, SigningSecret, WebhookDelivery
from webhooks.services import deliveries_sweep
from webhooks.signing import SIGNATURE_HEADER, delivery_headers, secret_rotate

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PUBLIC = "https://93.184.215.14/hooks/computepool"


def test_a_webhook_is_kept_with_the_job_and_shown_to_its_submitter(submitter, alice, api, mallory):
    job_id = submit(submitter, PUBLIC)
    assert JobWebhook.objects.get(job_id=job_id).url == PUBLIC
    assert SigningSecret.objects.filter(user=alice).exists()  # ready to verify with
    shown = submitter.get(f"/api/v1/jobs/{job_id}/webhook")
    assert shown.status_code == 200
    assert shown.json() == {
        "job_id": job_id,
        "url": PUBLIC,
        "created_at": shown.json()["created_at"],
        "delivery": None,  # the job has not ended
    }
    assert api(mallory, "submitter").get(f"/api/v1/jobs/{job_id}/webhook").status_code == 404
    plain = submit(submitter, None)
    assert submitter.get(f"/api/v1/jobs/{plain}/webhook").status_code == 404
    early = submitter.post(f"/api/v1/jobs/{job_id}/webhook/redeliver")
    assert early.status_code == 409 and early.json()["error"] == "not_redeliverable"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000/hook", "private, loopback"),
        ("http://[::1]/hook", "private, loopback"),
        ("http://[::ffff:127.0.0.1]/hook", "private, loopback"),
        ("http://10.1.2.3/hook", "private, loopback"),
        ("http://192.168.1.20/hook", "private, loopback"),
        ("http://169.254.169.254/latest/meta-data", "private, loopback"),
        ("http://0.0.0.0/hook", "private, loopback"),
        ("http://localhost:8000/hook", "loopback"),
        ("http://api.localhost/hook", "loopback"),
        ("ftp://example.com/hook", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("https://user:pw@example.com/hook", "credentials"),
        ("https:///hook", "must name a host"),
        ("https://bücher.example/hook", "must be ASCII"),
        ("https://example.com/a b", "must be ASCII"),
        ("https://example.com/\r\nX-Injected: 1", "must be ASCII"),
        ("https://example.com:99999/hook", "not a valid URL"),
        ("https://example.com/" + "a" * 2000, "no more than 2000"),
    ],
)
def test_a_url_leading_to_the_hubs_own_network_or_nowhere_is_a_400(submitter, url, why):
    response = submitter.post("/api/v1/jobs/", job_body(webhook_url=url), format="json")
    assert response.status_code == 400, response.json()
    assert why in " ".join(response.json()["fields"]["webhook_url"])
    assert not Job.objects.exists() and not JobWebhook.objects.exists()


def test_loopback_is_accepted_when_an_admin_allows_private_addresses(submitter, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    job_id = submit(submitter, "http://localhost:8000/hook")
    assert JobWebhook.objects.get(job_id=job_id).url == "http://localhost:8000/hook"
    # Cloud metadata stays out of reach whatever the setting.
    metadata = job_body(webhook_url="http://169.254.169.254/latest/meta-data")
    assert submitter.post("/api/v1/jobs/", metadata, format="json").status_code == 400


def test_a_refused_submission_leaves_no_webhook(api, alice):
    """No credits for the hold: the job, and its webhook with it, are not written."""
    broke = api(alice, "submitter")
    response = broke.post("/api/v1/jobs/", job_body(webhook_url=PUBLIC), format="json")
    assert response.status_code == 402
    assert not JobWebhook.objects.exists()


def test_the_secret_is_the_owners_and_a_rotation_signs_with_both_for_the_overlap(
    submitter, alice, api, mallory, settings
):
    first = submitter.get("/api/v1/webhooks/secret").json()
    assert first["secret"].startswith("whsec_") and first["rotated_at"] is None
    assert submitter.get("/api/v1/webhooks/secret").json()["secret"] == first["secret"]
    theirs = api(mallory, "submitter").get("/api/v1/webhooks/secret").json()["secret"]
    assert theirs != first["secret"]

    rotated = submitter.post("/api/v1/webhooks/secret/rotate").json()
    assert rotated["secret"] not in (first["secret"], theirs)
    body, now = b'{"id":1}', int(timezone.now().timestamp())
    secret = SigningSecret.objects.get(user=alice)
    header = delivery_headers(body=body, secret=secret, delivery_id=1, timestamp=now)
    signed = header[SIGNATURE_HEADER]
    assert signed.count("v1=") == 2
    for key in (first["secret"], rotated["secret"]):
        assert signature_problem(body, signed, secret=key, tolerance_s=300) is None

    settings.WEBHOOK_SECRET_OVERLAP_S = 0
    signed = delivery_headers(body=body, secret=secret, delivery_id=1, timestamp=now)
    assert signed[SIGNATURE_HEADER].count("v1=") == 1
    old = first["secret"]
    assert signature_problem(body, signed[SIGNATURE_HEADER], secret=old, tolerance_s=300)
    assert secret_rotate(user_id=alice.pk).previous == rotated["secret"]


def test_a_signature_outside_the_tolerance_is_refused():
    secret = SigningSecret(secret="whsec_x")
    old = int(timezone.now().timestamp()) - 301
    header = delivery_headers(body=b"{}", secret=secret, delivery_id=1, timestamp=old)
    problem = signature_problem(b"{}", header[SIGNATURE_HEADER], secret="whsec_x", tolerance_s=300)
    assert problem and "tolerance" in problem


def test_the_sweep_asks_again_only_for_deliveries_long_overdue(
    submitter, settings, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_SWEEP_INTERVAL_S = 60
    jobs = [submit(submitter, PUBLIC) for _ in range(4)]
    for job_id in jobs:
        assert submitter.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    lost, recent, done, dead = (WebhookDelivery.objects.get(webhook_id=j) for j in jobs)
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=lost.pk).update(next_attempt_at=now - timedelta(minutes=5))
    WebhookDelivery.objects.filter(pk=done.pk).update(
        state="succeeded", next_attempt_at=now - timedelta(minutes=5)
    )
    # Its worker died in the last attempt allowed: failed, not asked for again.
    WebhookDelivery.objects.filter(pk=dead.pk).update(
        state="sending", attempts=F("attempts_allowed"), lease_until=now - timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks() as asked:
        assert deliveries_sweep() == 1
    assert len(asked) == 1
    assert recent.state == "pending"
    dead.refresh_from_db()
    assert dead.state == "failed"
