"""Builders for job tests: funded submitters, online nodes, job bodies, agent calls."""

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, transaction

from tests.conftest import client_with_key
from tests.jobs.s3server import s3_bucket, s3_endpoint  # noqa: F401 - fixtures
from tests.nodes.conftest import beat, capabilities, gpu, register_node  # noqa: F401

CREDITS = 100  # minor units per credit


def fund(user, amount: int) -> None:
    import uuid

    from ledger.funding import credits_grant

    credits_grant(
        user_id=user.pk,
        amount=amount,
        actor="test",
        reference="test",
        idempotency_key=f"test-{uuid.uuid4().hex}",
    )


def online_node(operator, **kwargs: Any):
    """A registered node that has sent its first heartbeat: (node, agent client)."""
    node, key = register_node(operator, **kwargs)
    client = client_with_key(key)
    assert beat(client).status_code == 200
    node.refresh_from_db()
    return node, client


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "render",
        "kind": "script",
        "script": "echo hello from $CP_SLICE_INDEX",
        "slices": 1,
        "timeout_s": 60,
        "price_ceiling": 500,
        "max_attempts": 3,
        "requirements": {"cpu_cores": 1, "ram_mb": 256},
    }
    body.update(overrides)
    return body


def submit_job(user_id: int, slices: int, **fields: Any):
    """A `true` script job submitted through the service (no HTTP): the concurrency proofs'.
    `fields` replace or add body fields (`priority`, `requirements`)."""
    from jobs.serializers import JobIn
    from jobs.submission import job_submit

    data = JobIn(
        data={
            "kind": "script",
            "script": "true",
            "slices": slices,
            "timeout_s": 60,
            "price_ceiling": 500,
            "max_attempts": 3,
            **fields,
        }
    )
    data.is_valid(raise_exception=True)
    return job_submit(submitter_id=user_id, data=data.validated_data).job


def claim(client, wait: float = 0):
    return client.post("/api/v1/agent/claim", {"wait": wait}, format="json")


def upload(client, lease: dict, name: str, data: bytes):
    """Upload an output of the leased attempt, with its sha256."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/artifacts",
        {
            "lease_token": lease["lease_token"],
            "name": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "file": SimpleUploadedFile(name, data),
        },
        format="multipart",
    )


def complete(client, lease: dict, **body: Any):
    return client.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/complete",
        {"lease_token": lease["lease_token"], "exit_code": 0, **body},
        format="json",
    )


def fail(client, lease: dict, failure_class: str = "infra", **body: Any):
    return client.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/fail",
        {"lease_token": lease["lease_token"], "failure_class": failure_class, **body},
        format="json",
    )


@pytest.fixture
def redis_wakeups(settings):
    """Wake-ups through Redis pub/sub, as in production (not the no-Redis polling fallback)."""
    import os

    settings.REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def submitter(alice, api):
    """alice with 10,000 credits and her submitter client."""
    fund(alice, 10_000 * CREDITS)
    return api(alice, "submitter")


def wait_until_another_waits_on_a_lock(cursor, what: str, timeout: float = 15) -> None:
    """PostgreSQL: return once another connection to this database waits on a lock (the one
    `cursor`'s transaction holds, in the tests that call it); fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if cursor.fetchone()[0]:
            return
        assert time.monotonic() < deadline, f"{what} never waited on a lock"
        time.sleep(0.05)


@contextmanager
def held_open(
    work: Callable[[Any], None], waiter: str, then: Callable[[Any], None] | None = None
) -> Iterator[None]:
    """PostgreSQL: run `work(cursor)` in a transaction on another connection (a thread), enter
    the block once it has run, and keep that transaction open until a connection waits on one
    of its locks (what the block does, named `waiter`); then `then(cursor)`, if given, and
    commit. On leaving the block, fails unless that transaction committed."""
    holding = threading.Event()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '20s'")
                work(cursor)
                holding.set()
                wait_until_another_waits_on_a_lock(cursor, waiter)
                if then is not None:
                    then(cursor)
            outcome["other"] = "committed"
        except BaseException as exc:  # reported below
            outcome["other"] = exc
        finally:
            holding.set()  # a failure too, reported at once rather than after the wait
            connection.close()

    other = threading.Thread(target=run)
    other.start()
    try:
        assert holding.wait(15) and "other" not in outcome, outcome
        yield
    finally:
        other.join(30)
    assert outcome.get("other") == "committed", outcome
