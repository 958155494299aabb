"""Metrics and alerts across real processes: a hub of two gunicorn workers and a prefork Celery
worker of two children, each counting in its own process, with PROMETHEUS_MULTIPROC_DIR summing
them; and an alert mailed and POSTed by the real worker from the real broker."""

import os
import shlex
from pathlib import Path

import pytest
import requests
from django.db import connection

from nodes.services.quarantine import Rule, node_quarantine
from people.services import user_create
from tests.conftest import client_with_key
from tests.core.alerting import drain_queue, webhook_receiver
from tests.core.scraping import samples, value
from tests.e2e.conftest import LiveStack, database_url
from tests.e2e.pgcluster import free_port
from tests.jobs.conftest import CREDITS, fund, submit_job
from tests.nodes.conftest import beat, register_node

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SLICES = 6
# Each hub worker is replaced after a few requests: the figures of the ones gone must still
# count, whichever process a scrape reaches.
HUB = shlex.split(
    "-m gunicorn computepool.wsgi -w 2 -k gthread --threads 2 --timeout 60 --max-requests 4"
)
WORKER = shlex.split(
    "-m celery -A computepool worker -l info -P prefork -c 2 --without-gossip --without-mingle "
    "--without-heartbeat"
)


@pytest.fixture
def receiver():
    with webhook_receiver() as found:
        yield found


@pytest.fixture
def processes(transactional_db, tmp_path: Path, settings, receiver):
    """The hub and the worker on the test's database and this run's Redis (REDIS_URL and
    CELERY_BROKER_URL as given: the broker's queue is emptied first)."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://"):
        pytest.skip("needs CELERY_BROKER_URL=redis://…")
    drain_queue()
    _, hook = receiver
    settings.ALERT_WEBHOOK_URL = hook  # this process queues the webhook's task
    port, worker_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_DATABASE_NAME", "DEBUG")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "computepool.settings",
            "DATABASE_URL": database_url(connection.settings_dict),
            "COMPUTEPOOL_VAR_DIR": str(tmp_path / "var"),
            "SECRET_KEY": "metrics-test-" + os.urandom(8).hex(),
            "THROTTLE_PER_KEY": "100000/min",
            "PYTHONUNBUFFERED": "1",
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(tmp_path / "mail"),
            "ALERT_WEBHOOK_URL": hook,
            "JOB_TRUST_AFTER_VERIFIED": "0",
            "JOB_SPOTCHECK_MAX_PCT": "0",
        }
    )
    stack = LiveStack(url=f"http://127.0.0.1:{port}", env=env, workdir=tmp_path)
    hub_dir, worker_dir = tmp_path / "metrics-hub", tmp_path / "metrics-worker"
    try:
        stack.spawn(
            "hub",
            [*HUB, "-b", f"127.0.0.1:{port}"],
            env | {"PROMETHEUS_MULTIPROC_DIR": str(hub_dir)},
        )
        stack.spawn(
            "worker",
            WORKER,
            env
            | {
                "PROMETHEUS_MULTIPROC_DIR": str(worker_dir),
                "WORKER_METRICS_PORT": str(worker_port),
            },
        )
        stack.wait_until(
            "the hub's /healthz",
            lambda: requests.get(f"{stack.url}/healthz", timeout=2).status_code == 200,
            timeout=60,
        )
        stack.worker_metrics = f"http://127.0.0.1:{worker_port}/metrics"
        stack.wait_until(
            "the worker's /metrics",
            lambda: requests.get(stack.worker_metrics, timeout=2).status_code == 200,
            timeout=60,
        )
        yield stack
    finally:
        stack.stop_all()
        drain_queue()


def _scrape(url: str) -> dict:
    # A new connection each time: gunicorn hands each to whichever worker accepts it.
    answer = requests.get(url, timeout=30, headers={"Connection": "close"})
    assert answer.status_code == 200
    return samples(answer.text)


def test_every_process_counts_and_any_scrape_sums_them(processes, receiver):
    alice = user_create(username="alice", roles=["submitter"])
    bob = user_create(username="bob", roles=["operator"], email="bob@example.com")
    dave = user_create(username="dave", roles=["admin"], email="dave@example.com")
    fund(alice, 10_000 * CREDITS)
    node, key = register_node(bob)
    assert beat(client_with_key(key)).status_code == 200
    submit_job(alice.pk, SLICES)

    # Each claim and completion on a new connection, so the two hub workers share them.
    agent = {"Authorization": f"Bearer {key}", "Connection": "close"}
    leases = []
    for _ in range(SLICES):
        answer = requests.post(
            f"{processes.url}/api/v1/agent/claim", json={}, headers=agent, timeout=30
        )
        assert answer.status_code == 200, answer.text
        leases.append(answer.json())
    for lease in leases:
        answer = requests.post(
            f"{processes.url}/api/v1/agent/attempts/{lease['attempt_id']}/complete",
            json={"lease_token": lease["lease_token"], "exit_code": 0},
            headers=agent,
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    hub_files = list((processes.workdir / "metrics-hub").glob("counter_*.db"))
    assert len(hub_files) >= 3, hub_files  # workers came and went while counting

    # Whichever worker answers, the scrape is the sum of both.
    for _ in range(6):
        found = _scrape(f"{processes.url}/metrics")
        assert value(found, "computepool_claims_total", result="leased") == SLICES
        succeeded = {"outcome": "succeeded", "failure_class": ""}
        assert value(found, "computepool_attempts_total", **succeeded) == SLICES
        assert value(found, "computepool_claim_seconds_count") == SLICES
        assert value(found, "computepool_tasks", state="queued", size_class="") == 0

    # An alert, queued after commit here, mailed and POSTed by the worker's children.
    node.refresh_from_db()
    node_quarantine(node=node, rule=Rule.THERMAL, reason="3 throttling episodes", actor="system")
    got, _ = receiver
    processes.wait_until("the webhook's alert", lambda: got, timeout=60)
    assert got[0]["kind"] == "node_quarantined" and "3 throttling episodes" in got[0]["body"]
    mail_dir = processes.workdir / "mail"
    mails = processes.wait_until("the alert's mail", lambda: list(mail_dir.glob("*")), timeout=60)
    text = mails[0].read_text()
    assert f"To: {dave.email}" in text and f"Node {node.pk} quarantined" in text
    assert "bob@example.com" not in text  # an operator, not an admin

    # The worker's port sums its children: both alert tasks, whichever child ran each.
    def worker_ran_both() -> dict | None:
        found = _scrape(processes.worker_metrics)
        ran = sum(
            value(found, "computepool_celery_tasks_total", task=task, state="SUCCESS")
            for task in ("core.alert_mail", "core.alert_webhook")
        )
        return found if ran == 2 else None

    found = processes.wait_until("the worker's figures", worker_ran_both, timeout=60)
    assert "computepool_tasks" not in {name for name, _ in found}  # the hub's to show
