"""A submitter's job, end to end: a real agent process claims its slices from a live hub, runs
them in a real sandbox, uploads outputs with checksums and completes; the hub settles each
attempt, the real beat schedule seals the log in the real worker, and the ledger verifies."""

import base64
import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from agent.sandbox import available_sandboxes
from jobs.models import Job
from ledger.funding import credits_grant
from ledger.models import Event, EventSeal
from nodes.models import Node
from people.services import api_key_create, user_create

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SCRIPT = """\
echo "slice $CP_SLICE_INDEX of $CP_SLICE_COUNT"
echo "CP_PROGRESS 50 halfway"
tr a-z A-Z < "$COMPUTEPOOL_IN/words.txt" > "$COMPUTEPOOL_OUT/upper-$CP_SLICE_INDEX.txt"
"""


def sandbox_args() -> list[str]:
    """The strongest sandbox this machine has; CI provides Docker (REQUIRE_DOCKER=1)."""
    found = available_sandboxes()
    if "docker" in found:
        subprocess.run(
            ["bash", "scripts/build_sandbox_images.sh", "busybox"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return ["--sandbox", "docker"]
    if os.environ.get("REQUIRE_DOCKER") == "1":
        pytest.fail("REQUIRE_DOCKER=1 but no Docker engine answers")
    if "bwrap" in found:
        return ["--sandbox", "bwrap"]
    return ["--allow-unsandboxed"]


def start_agent(live_stack, tmp_path: Path, op_key: str, *, name: str, region: str = "") -> None:
    """Register a node with the operator's key, then run its agent as the stack's "agent"."""
    config = tmp_path / "agent.json"
    agent = ["-m", "agent", "--config", str(config)]
    where = ["--region", region] if region else []
    registered = live_stack.run(
        [*agent, "register", "--hub", live_stack.url, "--token", op_key, "--name", name, *where]
    )
    assert registered.returncode == 0, registered.stdout + registered.stderr
    config.write_text(
        json.dumps(
            json.loads(config.read_text())
            | {"work_dir": str(tmp_path / "work"), "allowed_images": ["computepool/*"]}
        )
    )
    live_stack.spawn("agent", [*agent, "run", *sandbox_args()])


def test_a_job_with_slices_runs_through_a_real_agent(live_stack, tmp_path: Path):
    operator = user_create(username="e2e-op", roles=["operator"])
    submitter = user_create(username="e2e-sub", roles=["submitter"])
    _, op_key = api_key_create(user=operator, role="operator", name="e2e")
    _, sub_key = api_key_create(user=submitter, role="submitter", name="e2e")
    credits_grant(
        user_id=submitter.pk,
        amount=1_000_000,
        actor="test",
        reference="e2e",
        idempotency_key="e2e-grant",
    )
    start_agent(live_stack, tmp_path, op_key, name="e2e-rig", region="IN")

    words = b"pooled compute\n"
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {sub_key}"
    created = session.post(
        f"{live_stack.url}/api/v1/jobs/",
        json={
            "name": "shout",
            "kind": "script",
            "script": SCRIPT,
            "slices": 3,
            "timeout_s": 60,
            "price_ceiling": 500,
            "inputs": {"words.txt": base64.b64encode(words).decode()},
        },
        timeout=10,
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]

    def finished() -> str | None:
        state = Job.objects.values_list("state", flat=True).get(pk=job_id)
        return state if state in ("succeeded", "failed", "cancelled") else None

    assert live_stack.wait_until("the job to finish", finished, timeout=90) == "succeeded"
    detail = session.get(f"{live_stack.url}/api/v1/jobs/{job_id}", timeout=10).json()
    outputs = {}
    for task in detail["tasks"]:
        (attempt,) = [a for a in task["attempts"] if a["state"] == "succeeded"]
        assert f"slice {task['index']} of 3" in attempt["stdout_tail"]
        for artifact in attempt["artifacts"]:
            body = session.get(
                f"{live_stack.url}/api/v1/artifacts/{artifact['id']}/download", timeout=10
            ).content
            assert hashlib.sha256(body).hexdigest() == artifact["sha256"]
            outputs[artifact["name"]] = body
    assert outputs == {f"upper-{i}.txt": words.upper() for i in range(3)}
    assert Event.objects.filter(type="AttemptSettled").count() == 3
    # Before its first claim the agent benchmarked the machine, in its sandbox, for the hub.
    node = Node.objects.get(name="e2e-rig")
    assert node.benchmarks.get().state == "passed"
    assert (node.tier, node.measured["gpus"]) == ("cpu", [])
    assert node.measured["cpu_gflops"] > 0

    live_stack.kill("agent", signal.SIGTERM)
    # The real beat schedule, in the real worker, seals what was written.
    live_stack.wait_until(
        "beat to seal every event",
        lambda: EventSeal.objects.count() >= Event.objects.count() - 2,
        timeout=30,
    )
    verified = live_stack.run(["manage.py", "verify_ledger"])
    assert verified.returncode == 0, verified.stdout + verified.stderr
