"""Builders for webhook tests: a job that names a URL, ended through the agents' API."""

import hashlib
import time
from typing import Any

import pytest

from tests.jobs.conftest import claim, complete, job_body, online_node, submitter, upload  # noqa: F401

OUTPUT = b"42 frames rendered\n"


@pytest.fixture
def loopback_allowed(settings) -> None:
    """Receivers in these tests listen on 127.0.0.1: the admin's switch, turned on."""
    settings.WEBHOOK_ALLOW_PRIVATE = True


def submit(client, url: str | None, **overrides: Any) -> int:
    """Submit through `client` (a submitter's), naming `url` unless None; the job's id."""
    body = job_body(**overrides) if url is None else job_body(webhook_url=url, **overrides)
    created = client.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.json()
    return created.json()["id"]


def run_to_success(agent) -> dict[str, Any]:
    """Claim the next task, upload one output and complete it; the lease."""
    lease = claim(agent).json()
    # The hub bills the time from the claim to the end: at the tests' spot price (105 minor units
    # a second) an attempt ended within 10 ms costs nothing, which a fast machine can do.
    time.sleep(0.05)
    uploaded = upload(agent, lease, "frames.txt", OUTPUT)
    assert uploaded.status_code == 201, uploaded.content
    sha = hashlib.sha256(OUTPUT).hexdigest()
    done = complete(agent, lease, artifacts=[{"name": "frames.txt", "sha256": sha}])
    assert done.status_code == 200, done.json()
    return lease


def succeeded_job(client, operator, url: str | None) -> int:
    job_id = submit(client, url)
    _, agent = online_node(operator)
    run_to_success(agent)
    return job_id
