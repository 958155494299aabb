"""Alerts as they really travel: queued on the test's Redis broker by `core.alerts.alert` after
commit, read back from the queue, then run as the worker would run them (the task functions
themselves), with Django's locmem mail backend standing in for SMTP."""

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import redis
from django.conf import settings

from computepool.celery import app

_QUEUE = "celery"  # Celery's default queue: a Redis list of that name


@dataclass(frozen=True)
class Queued:
    task: str
    args: list

    def run(self) -> object:
        return app.tasks[self.task](*self.args)


def _broker() -> redis.Redis:
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.fail("these tests read the Celery queue: set CELERY_BROKER_URL=redis://…")
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def drain_queue() -> list[Queued]:
    """Every task message on the queue, oldest first, taken off it."""
    broker = _broker()
    found = []
    while (raw := broker.rpop(_QUEUE)) is not None:
        message = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        found.append(Queued(message["headers"]["task"], args))
    return found


@pytest.fixture
def celery_queue():
    """An empty Celery queue before the test; `drain_queue` reads what it gained."""
    drain_queue()
    yield drain_queue
    drain_queue()


@contextmanager
def webhook_receiver() -> Iterator[tuple[list[dict], str]]:
    """A local HTTP server standing in for the admins' webhook receiver: (the JSON bodies it
    got, its URL)."""
    got: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield got, f"http://127.0.0.1:{server.server_port}/alerts"
    finally:
        server.shutdown()
