"""Every example in docs/api.md, run as written against a live hub.

The shell examples run in bash, one after another as a reader would type them, with `curl`
failing on an HTTP error (`--fail-with-body`) and `set -euo pipefail`, so an example that
answers 4xx, or a command that fails, fails the test. What a reader supplies is supplied: the
hub's address (the page's `http://127.0.0.1:8000` is this test's live server), `$JOB` (the id
the submission answered), `$ARTIFACT` (an artifact of it). Between the examples the test plays
the agent, through the agents' API, so that the job has ended and has outputs to fetch. The
Python example (verifying a webhook's signature) is run on a delivery the hub really signed.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.conftest import client_with_key
from tests.e2e.conftest import database_url
from tests.jobs.conftest import claim, complete, online_node, upload
from tests.webhooks.conftest import succeeded_job
from tests.webhooks.receiver import receiver
from webhooks.models import WebhookDelivery
from webhooks.services import delivery_attempt

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
PAGE_HUB = "http://127.0.0.1:8000"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def examples(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == language]


class Shell:
    """bash sessions that keep their exported variables from one example to the next."""

    def __init__(self, scratch: Path, hub: str) -> None:
        self.state = scratch / "exported.sh"
        self.state.write_text("")
        self.hub = hub
        self.env = {
            **os.environ,
            # `python manage.py` on the test's database
            "DATABASE_URL": database_url(connection.settings_dict),
            "PYTHON_FOR_DOCS": sys.executable,
        }

    def export(self, **names: Any) -> None:
        with self.state.open("a") as out:
            for name, value in names.items():
                out.write(f"export {name}={shlex.quote(str(value))}\n")

    def run(self, example: str, cwd: Path = ROOT) -> str:
        script = "\n".join(
            [
                "set -euo pipefail",
                f"source {shlex.quote(str(self.state))}",
                'curl() { command curl --fail-with-body --show-error "$@"; }',
                'python() { "$PYTHON_FOR_DOCS" "$@"; }',
                example.replace(PAGE_HUB, self.hub),
                f"export -p > {shlex.quote(str(self.state))}",
            ]
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{example}\n--- stdout\n{done.stdout}\n--- {done.stderr}"
        return done.stdout

    def value(self, name: str) -> str:
        return self.run(f'printf %s "${name}"')


def _run_the_job_as_its_agent(agent, slices: int) -> None:
    """What the example's script would write on a node: each slice's words in capitals."""
    for _ in range(slices):
        lease = claim(agent).json()
        name = f"upper-{lease['spec']['slice_index']}.txt"
        assert upload(agent, lease, name, b"POOLED COMPUTE\n").status_code == 201
        assert complete(agent, lease).status_code == 200


def test_every_example_of_the_api_guide_runs_as_written(live_server, tmp_path, bob, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver below listens on 127.0.0.1
    get_key, have_credits, quote, submit_job, watch, download, webhook = examples("bash")
    (verify_signature,) = examples("python")
    shell = Shell(tmp_path, live_server.url)
    _, agent = online_node(bob, name="docs-rig", gpus=[])  # a CPU node: the job asks for one core

    assert json.loads(shell.run(get_key))["username"] == "alice"
    key = shell.value("KEY")
    assert key.startswith("cpk_")
    statement = shell.run(have_credits)
    granted, balance_and_csv = statement.split("\n", 1)
    assert granted.startswith("granted 1000.00 credits to alice")
    balance, end = json.JSONDecoder().raw_decode(balance_and_csv)
    assert balance["available_minor"] == 100_000
    assert balance_and_csv[end:].startswith("posting_id,recorded_at,kind,account,amount_minor")
    priced = json.loads(shell.run(quote))
    assert priced["within_ceiling"] and 0 < priced["expected_minor"] <= priced["max_minor"]

    job = json.loads(shell.run(submit_job))
    assert job["state"] == "queued"
    _run_the_job_as_its_agent(agent, slices=3)
    detail = client_with_key(key).get(f"/api/v1/jobs/{job['id']}").json()
    assert detail["state"] == "succeeded", detail
    artifact = detail["tasks"][0]["attempts"][0]["artifacts"][0]
    shell.export(JOB=job["id"], ARTIFACT=artifact["id"])

    shell.run(watch)
    shell.run(download, cwd=tmp_path)
    assert (tmp_path / artifact["name"]).read_bytes() == b"POOLED COMPUTE\n"

    with receiver() as hook:
        hooked = succeeded_job(client_with_key(key), bob, hook.url)
        delivery = WebhookDelivery.objects.get(webhook_id=hooked)
        delivery_attempt(delivery_id=delivery.pk)
        shell.export(JOB=hooked)
        shell.run(webhook)
        (sent,) = hook.received[:1]
    secret = client_with_key(key).get("/api/v1/webhooks/secret").json()["secret"]
    names: dict[str, Any] = {}
    exec(compile(verify_signature, str(DOC), "exec"), names)  # noqa: S102 - the page's own code
    header = sent.headers["ComputePool-Signature"]
    assert names["verified"](sent.body, header, secret)
    assert not names["verified"](sent.body + b" ", header, secret)
    assert not names["verified"](sent.body, header, secret + "x")


def test_the_guide_has_no_example_this_test_does_not_run():
    # The test above unpacks the examples by position: a new one must be given its place there.
    assert [len(examples("bash")), len(examples("python"))] == [7, 1]
