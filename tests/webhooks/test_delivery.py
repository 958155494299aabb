"""A job's end, delivered: signed, retried with backoff, recorded, sent once, never to a
refused address. The receiver is a real HTTP server; attempts are the worker's service, called
here as the worker calls it (tests/e2e/test_webhooks.py runs the worker itself)."""

import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.signatures import signature_problem
from jobs.models import Job
from ledger.settlement import settlements_for_attempts
from tests.jobs.conftest import claim, fail, online_node
from tests.webhooks.conftest import OUTPUT, submit, succeeded_job
from tests.webhooks.receiver import receiver
from webhooks.models import DeliveryState, WebhookDelivery
from webhooks.services import backoff_s, delivery_attempt, delivery_open
from webhooks.signing import SIGNATURE_HEADER, secret_ensure

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture(autouse=True)
def _quick(settings) -> None:
    settings.WEBHOOK_BACKOFF_S = 1
    settings.WEBHOOK_TIMEOUT_S = 5


def _due_now(delivery_id: int) -> None:
    """Skip the backoff's wait: the next attempt is due now."""
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now())


def test_a_finished_job_is_delivered_signed_after_a_failed_first_attempt(
    submitter, alice, bob, loopback_allowed, django_capture_on_commit_callbacks
):
    with receiver(500) as hook:
        with django_capture_on_commit_callbacks() as enqueued:
            job_id = succeeded_job(submitter, bob, hook.url)
        delivery = WebhookDelivery.objects.get(webhook_id=job_id)
        opened = (delivery.state, delivery.job_state, delivery.attempts)
        assert opened == ("pending", "succeeded", 0)
        assert enqueued, "the end of the job asks the worker for the delivery once it commits"

        assert delivery_attempt(delivery_id=delivery.pk) == backoff_s(1) == 1
        assert delivery_attempt(delivery_id=delivery.pk) is None  # not due: nothing is sent
        assert len(hook.received) == 1
        time.sleep(1.05)
        assert delivery_attempt(delivery_id=delivery.pk) is None
        assert delivery_attempt(delivery_id=delivery.pk) is None  # a double fire after success
        first, second = hook.wait_for(2, timeout=5)

    assert len(hook.received) == 2
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("succeeded", 2, 200)
    assert delivery.delivered_at is not None
    log = [(a.number, a.status_code, a.error) for a in delivery.attempt_log.all()]
    assert log == [(1, 500, "answered 500"), (2, 200, "")]
    assert first.body == second.body == delivery.body.encode()
    secret = secret_ensure(user_id=alice.pk).secret
    for request in (first, second):
        assert request.path == "/hooks/computepool"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["ComputePool-Delivery"] == str(delivery.pk)
        header = request.headers[SIGNATURE_HEADER]
        assert signature_problem(request.body, header, secret=secret, tolerance_s=300) is None
        assert signature_problem(request.body, header, secret="whsec_guess", tolerance_s=300)

    body = json.loads(second.body)
    job = Job.objects.get(pk=job_id)
    assert (body["id"], body["type"]) == (delivery.pk, "job.finished")
    assert body["job"]["id"] == job_id and body["job"]["state"] == "succeeded"
    assert body["job"]["finished_at"].startswith(job.finished_at.strftime("%Y-%m-%dT%H:%M:%S"))
    attempts = job.tasks.get().attempt_set.values_list("pk", flat=True)
    charged = sum(s.charged_minor for s in settlements_for_attempts(attempts).values())
    assert body["job"]["cost_minor"] == charged > 0
    (artifact,) = body["job"]["artifacts"]
    assert (artifact["name"], artifact["size"], artifact["task_index"]) == ("frames.txt", 19, 0)
    download = submitter.get(artifact["download_path"])
    assert b"".join(download.streaming_content) == OUTPUT
    assert download["X-Checksum-Sha256"] == artifact["sha256"]


def test_a_job_without_a_webhook_opens_no_delivery(submitter, bob):
    job_id = succeeded_job(submitter, bob, None)
    assert Job.objects.get(pk=job_id).state == "succeeded"
    assert not WebhookDelivery.objects.exists()


def test_a_second_end_of_the_same_job_opens_nothing_more(submitter, bob, loopback_allowed):
    job_id = succeeded_job(submitter, bob, "http://127.0.0.1:9/hook")
    delivery_open(job_id, "succeeded")
    assert WebhookDelivery.objects.filter(webhook_id=job_id).count() == 1


def test_failed_and_cancelled_jobs_are_delivered_with_their_state(submitter, bob, loopback_allowed):
    failed = submit(submitter, "http://127.0.0.1:9/failed", max_attempts=1)
    _, agent = online_node(bob)
    assert fail(agent, claim(agent).json(), "job", exit_code=3).status_code == 200
    cancelled = submit(submitter, "http://127.0.0.1:9/cancelled")
    assert submitter.post(f"/api/v1/jobs/{cancelled}/cancel").status_code == 200
    states = dict(WebhookDelivery.objects.values_list("webhook_id", "job_state"))
    assert states == {failed: "failed", cancelled: "cancelled"}


def test_loopback_is_refused_at_delivery_when_it_is_not_allowed(submitter, bob, settings):
    """Allowed when the job was submitted, refused when it ends: checked again before sending,
    and nothing reaches the receiver."""
    settings.WEBHOOK_ALLOW_PRIVATE = True
    with receiver() as hook:
        job_id = succeeded_job(submitter, bob, hook.url.replace("127.0.0.1", "localhost"))
        settings.WEBHOOK_ALLOW_PRIVATE = False
        delivery = WebhookDelivery.objects.get(webhook_id=job_id)
        assert delivery_attempt(delivery_id=delivery.pk) is None
        time.sleep(0.2)
        assert hook.received == []
    delivery.refresh_from_db()
    assert delivery.state == "failed"
    (attempt,) = delivery.attempt_log.all()
    assert attempt.status_code is None
    assert attempt.error.startswith("refused: ") and "loopback" in attempt.error


def test_it_gives_up_after_the_allowed_attempts_and_redelivers_on_request(
    submitter, bob, loopback_allowed, settings
):
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    with receiver(503, 503) as hook:
        job_id = succeeded_job(submitter, bob, hook.url)
        delivery = WebhookDelivery.objects.get(webhook_id=job_id)
        assert delivery_attempt(delivery_id=delivery.pk) == 1
        _due_now(delivery.pk)
        assert delivery_attempt(delivery_id=delivery.pk) is None
        delivery.refresh_from_db()
        assert (delivery.state, delivery.attempts) == ("failed", 2)

        again = submitter.post(f"/api/v1/jobs/{job_id}/webhook/redeliver")
        assert again.status_code == 202, again.json()
        assert again.json()["state"] == "pending" and again.json()["attempts_allowed"] == 4
        busy = submitter.post(f"/api/v1/jobs/{job_id}/webhook/redeliver")
        assert busy.status_code == 409 and busy.json()["error"] == "not_redeliverable"
        assert delivery_attempt(delivery_id=delivery.pk) is None
        assert len(hook.wait_for(3, timeout=5)) == 3
    shown = submitter.get(f"/api/v1/jobs/{job_id}/webhook").json()["delivery"]
    assert shown["state"] == "succeeded"
    log = [(a["number"], a["status_code"], a["succeeded"]) for a in shown["attempt_log"]]
    assert log == [(1, 503, False), (2, 503, False), (3, 200, True)]


def test_an_unreachable_receiver_is_an_attempt_that_failed(submitter, bob, loopback_allowed):
    with receiver() as hook:
        url = hook.url
    job_id = succeeded_job(submitter, bob, url)  # nothing listens there any more
    delivery = WebhookDelivery.objects.get(webhook_id=job_id)
    assert delivery_attempt(delivery_id=delivery.pk) == 1
    (attempt,) = delivery.attempt_log.all()
    assert attempt.status_code is None and "Connection" in attempt.error


def test_an_attempt_whose_worker_died_is_taken_again_after_its_lease(
    submitter, bob, loopback_allowed
):
    with receiver() as hook:
        job_id = succeeded_job(submitter, bob, hook.url)
        delivery = WebhookDelivery.objects.get(webhook_id=job_id)
        held = timezone.now() + timedelta(minutes=1)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            state=DeliveryState.SENDING, attempts=1, lease_until=held
        )
        assert delivery_attempt(delivery_id=delivery.pk) is None
        assert hook.received == []
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            lease_until=timezone.now() - timedelta(seconds=1)
        )
        assert delivery_attempt(delivery_id=delivery.pk) is None
        assert len(hook.wait_for(1, timeout=5)) == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("succeeded", 2)


@pytest.mark.django_db(transaction=True)
def test_two_workers_given_the_same_delivery_send_it_once(submitter, bob, loopback_allowed):
    """A double fire (the retry's message and the sweep's, two workers): while one attempt is
    under way the other finds nothing to take, and after it succeeded there is nothing left."""
    with receiver(delay_s=0.5) as hook:
        job_id = succeeded_job(submitter, bob, hook.url)
        delivery = WebhookDelivery.objects.get(webhook_id=job_id)
        start = threading.Barrier(2)

        def work() -> None:
            try:
                start.wait(5)
                delivery_attempt(delivery_id=delivery.pk)
            finally:
                connection.close()

        workers = [threading.Thread(target=work) for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(15)
        assert delivery_attempt(delivery_id=delivery.pk) is None
    assert len(hook.received) == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.attempt_log.count()) == ("succeeded", 1, 1)
