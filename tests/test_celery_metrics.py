"""The worker's and beat's own /metrics: Celery's signals count tasks, and each process serves
its figures (not the database's) on its port."""

import socket
import urllib.request

import pytest

from computepool import celery_metrics
from computepool.celery import app
from tests.core.scraping import families, samples, value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.read().decode()


@pytest.fixture
def worker_port(settings):
    settings.WORKER_METRICS_PORT = _free_port()
    server, _ = celery_metrics._worker_serves()
    yield settings.WORKER_METRICS_PORT
    server.shutdown()


@pytest.mark.django_db
def test_the_worker_serves_its_tasks_figures_and_not_the_databases(worker_port):
    app.loader.import_default_modules()
    task = {"task": "ledger.seal_chain"}
    before = samples(_get(worker_port))
    app.tasks["ledger.seal_chain"].apply()  # runs here, through Celery's signals
    after = samples(_get(worker_port))
    ok = {"state": "SUCCESS", **task}
    assert value(after, "computepool_celery_tasks_total", **ok) == (
        value(before, "computepool_celery_tasks_total", **ok) + 1
    )
    assert value(after, "computepool_celery_task_seconds_count", **task) == (
        value(before, "computepool_celery_task_seconds_count", **task) + 1
    )
    exposed = families(_get(worker_port))
    assert "computepool_claims_total" in exposed  # every counter of the code base
    assert "computepool_tasks" not in exposed and "computepool_nodes" not in exposed


def test_a_failing_task_is_counted_as_a_failure(worker_port):
    @app.task(name="tests.explodes")
    def explodes() -> None:
        raise ValueError("boom")

    explodes.apply()
    failed = {"task": "tests.explodes", "state": "FAILURE"}
    assert value(samples(_get(worker_port)), "computepool_celery_tasks_total", **failed) == 1


def test_beat_counts_what_it_sends_and_the_hub_does_not(settings, monkeypatch, celery_queue):
    settings.BEAT_METRICS_PORT = None  # beat's server is the worker's code; its count is not
    name = "computepool_beat_sent_total"
    sent = {"task": "ledger.seal_chain"}
    from prometheus_client import generate_latest

    from core.metrics import LIVE

    def count() -> float:
        return value(samples(generate_latest(LIVE).decode()), name, **sent)

    start = count()
    app.send_task("ledger.seal_chain")  # a hub process publishing: not beat's
    assert count() == start
    monkeypatch.setattr(celery_metrics, "_in_beat", False)
    celery_metrics._beat_serves()
    app.send_task("ledger.seal_chain")
    assert count() == start + 1
    assert [q.task for q in celery_queue()] == ["ledger.seal_chain", "ledger.seal_chain"]
