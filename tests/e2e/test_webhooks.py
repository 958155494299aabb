"""A completion webhook, end to end: a job submitted to a live hub names a receiver (a real HTTP
server in this process), a real agent runs it, and the real worker delivers its end, signed,
after the receiver refused the first attempt; the hub shows the delivery and its attempts."""

import json
from pathlib import Path

import pytest
import requests

from core.signatures import signature_problem
from jobs.models import Job
from ledger.funding import credits_grant
from people.services import api_key_create, user_create
from tests.e2e.test_node_liveness import registered_agent
from tests.webhooks.receiver import receiver
from webhooks.models import WebhookDelivery
from webhooks.signing import SIGNATURE_HEADER

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SCRIPT = 'echo "rendered" > "$COMPUTEPOOL_OUT/frame.txt"\n'


@pytest.fixture
def live_stack_env() -> dict[str, str]:
    # The receiver listens on 127.0.0.1: allowed by the admin's switch, as it must be.
    return {"WEBHOOK_ALLOW_PRIVATE": "1", "WEBHOOK_BACKOFF_S": "1", "WEBHOOK_TIMEOUT_S": "5"}


def test_the_worker_delivers_a_jobs_end_after_a_refused_first_attempt(live_stack, tmp_path: Path):
    submitter = user_create(username="e2e-sub", roles=["submitter"])
    _, sub_key = api_key_create(user=submitter, role="submitter", name="e2e")
    credits_grant(
        user_id=submitter.pk, amount=1_000_000, actor="test", reference="e2e",
        idempotency_key="e2e-webhooks",
    )  # fmt: skip
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {sub_key}"
    agent, _ = registered_agent(live_stack, tmp_path)

    with receiver(500) as hook:
        created = session.post(
            f"{live_stack.url}/api/v1/jobs/",
            json={
                "name": "frame",
                "kind": "script",
                "script": SCRIPT,
                "timeout_s": 60,
                "price_ceiling": 500,
                "webhook_url": hook.url,
            },
            timeout=10,
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        live_stack.spawn("agent", [*agent, "run", "--allow-unsandboxed"])
        live_stack.wait_until("two deliveries", lambda: len(hook.received) >= 2, timeout=90)
        first, second = hook.received

    job = Job.objects.get(pk=job_id)
    assert job.state == "succeeded"
    # The end committed first; the receiver heard of it afterwards, from the worker.
    assert job.finished_at.timestamp() <= first.at
    secret = session.get(f"{live_stack.url}/api/v1/webhooks/secret", timeout=10).json()["secret"]
    for request in (first, second):
        header = request.headers[SIGNATURE_HEADER]
        assert signature_problem(request.body, header, secret=secret, tolerance_s=300) is None
    assert first.body == second.body
    assert second.at - first.at >= 1  # the backoff
    body = json.loads(second.body)
    assert body["type"] == "job.finished" and body["job"]["state"] == "succeeded"
    assert [a["name"] for a in body["job"]["artifacts"]] == ["frame.txt"]
    (artifact,) = body["job"]["artifacts"]
    download = session.get(live_stack.url + artifact["download_path"], timeout=10)
    assert download.content == b"rendered\n"

    def recorded() -> dict | None:
        shown = session.get(f"{live_stack.url}/api/v1/jobs/{job_id}/webhook", timeout=10).json()
        return shown if shown["delivery"]["state"] == "succeeded" else None

    shown = live_stack.wait_until("the delivery recorded", recorded, timeout=15)
    log = [(a["number"], a["status_code"]) for a in shown["delivery"]["attempt_log"]]
    assert log == [(1, 500), (2, 200)]
    assert WebhookDelivery.objects.get(webhook_id=job_id).attempts == 2
