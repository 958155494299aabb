"""The machine's owner comes back: a real agent whose owner starts a "game" (a real process of
the name its rules watch) hands its running task back to a live hub, which queues it again at
once for another node, without counting it against the task's attempts or the node."""

import json
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from jobs.models import Attempt, Job, Task
from ledger.funding import credits_grant
from ledger.models import Event
from nodes.models import Node
from people.services import api_key_create, user_create
from tests.e2e.test_job_run import sandbox_args

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GAME = "cp-e2e-game"


def _agent(live_stack, tmp_path: Path, op_key: str, name: str, *flags: str) -> None:
    config = tmp_path / f"{name}.json"
    agent = ["-m", "agent", "--config", str(config)]
    registered = live_stack.run(
        [*agent, "register", "--hub", live_stack.url, "--token", op_key, "--name", name]
    )
    assert registered.returncode == 0, registered.stdout + registered.stderr
    config.write_text(
        json.dumps(
            json.loads(config.read_text())
            | {"work_dir": str(tmp_path / f"work-{name}"), "state_dir": str(tmp_path / name)}
        )
    )
    live_stack.spawn(name, [*agent, "run", *sandbox_args(), *flags])


def test_a_task_handed_back_by_its_owners_machine_runs_on_another_node(live_stack, tmp_path: Path):
    operator = user_create(username="e2e-op", roles=["operator"])
    submitter = user_create(username="e2e-sub", roles=["submitter"])
    _, op_key = api_key_create(user=operator, role="operator", name="e2e")
    _, sub_key = api_key_create(user=submitter, role="submitter", name="e2e")
    credits_grant(
        user_id=submitter.pk, amount=1_000_000, actor="test", reference="e2e",
        idempotency_key="e2e-grant",
    )  # fmt: skip
    _agent(live_stack, tmp_path, op_key, "home-pc", "--pause-program", GAME)
    created = requests.post(
        f"{live_stack.url}/api/v1/jobs/",
        headers={"Authorization": f"Bearer {sub_key}"},
        json={
            "name": "long", "kind": "script", "script": "sleep 8; echo done", "slices": 1,
            "timeout_s": 60, "price_ceiling": 500, "max_attempts": 1,
        },
        timeout=10,
    )  # fmt: skip
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    live_stack.wait_until(
        "the task to run on the owner's machine",
        lambda: Attempt.objects.filter(state="running", node__name="home-pc").exists(),
        timeout=60,
    )

    game = tmp_path / GAME
    game.symlink_to("/bin/sleep")
    played = subprocess.Popen([str(game), "120"])
    try:
        handed = live_stack.wait_until(
            "the hand-back",
            lambda: Event.objects.filter(type="AttemptHandedBack").first(),
            timeout=20,
        )
        assert handed.payload["reason"] == f"{GAME} running"
        task = Task.objects.get(job_id=job_id)
        # Its only attempt is not used up: it can still run.
        assert task.max_attempts == 2
        assert task.state in ("queued", "leased", "running")

        # Another machine joins and takes it at once: the hub waited for no lease to expire.
        _agent(live_stack, tmp_path, op_key, "rig-2")
        state = live_stack.wait_until(
            "the job to finish",
            lambda: (
                Job.objects.values_list("state", flat=True).get(pk=job_id)
                if Job.objects.filter(pk=job_id, state__in=("succeeded", "failed")).exists()
                else None
            ),
            timeout=90,
        )
    finally:
        played.kill()
        played.wait(5)
    assert state == "succeeded"
    first, second = Attempt.objects.filter(task__job_id=job_id).order_by("number")
    assert (first.node.name, first.state) == ("home-pc", "lost")
    assert first.detail == f"handed back: {GAME} running"
    assert (second.node.name, second.state) == ("rig-2", "succeeded")
    assert Node.objects.get(name="home-pc").consecutive_failures == 0

    live_stack.kill("home-pc", signal.SIGTERM)
    live_stack.kill("rig-2", signal.SIGTERM)
    verified = live_stack.run(["manage.py", "verify_ledger"])
    assert verified.returncode == 0, verified.stdout + verified.stderr
