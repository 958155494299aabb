"""A real agent against a real hub: registered, online, killed, reaped by the real beat schedule
in the real worker (degraded, then offline), restarted, online again; stopped while its claims
wait, and given no work after."""

import json
import signal
import time
from pathlib import Path

import pytest
import requests

from jobs.models import Attempt, Task
from ledger.funding import credits_grant
from ledger.models import Event
from ledger.verify import verify_ledger
from nodes.models import Node
from people.services import api_key_create, user_create

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def state(node_id: int) -> str:
    return Node.objects.values_list("state", flat=True).get(pk=node_id)


def flips(node_id: int) -> list[tuple[str, str, str]]:
    return [
        (e.payload["from"], e.payload["to"], e.actor)
        for e in Event.objects.filter(stream=f"node:{node_id}", type="NodeStateChanged").order_by(
            "version"
        )
    ]


def registered_agent(live_stack, tmp_path: Path) -> tuple[list[str], int]:
    """An agent registered by the CLI (its argv before the command, its node id)."""
    operator = user_create(username="e2e-operator", roles=["operator"])
    _, token = api_key_create(user=operator, role="operator", name="e2e")
    config = tmp_path / "agent.json"
    agent = ["-m", "agent", "--config", str(config)]

    registered = live_stack.run(
        [
            *agent,
            "register",
            "--hub",
            live_stack.url,
            "--token",
            token,
            "--name",
            "e2e-rig",
            "--region",
            "IN",
        ]
    )
    assert registered.returncode == 0, registered.stdout + registered.stderr
    settings = json.loads(config.read_text())
    node_id = settings["node_id"]
    assert settings["agent_key"].startswith("cpa_") and state(node_id) == "offline"
    # Keep the agent's scratch space inside the test's directory.
    config.write_text(json.dumps(settings | {"work_dir": str(tmp_path / "work")}))
    return agent, node_id


def test_it_reaps_a_killed_agent_and_brings_it_back(live_stack, tmp_path: Path):
    agent, node_id = registered_agent(live_stack, tmp_path)
    run = [*agent, "run", "--allow-unsandboxed"]
    live_stack.spawn("agent", run)
    live_stack.wait_until("the node online", lambda: state(node_id) == "online", timeout=20)

    live_stack.kill("agent", signal.SIGKILL)
    live_stack.wait_until("the node degraded", lambda: state(node_id) == "degraded", timeout=15)
    live_stack.wait_until("the node offline", lambda: state(node_id) == "offline", timeout=15)

    live_stack.spawn("agent", run)
    live_stack.wait_until("the node online again", lambda: state(node_id) == "online", timeout=20)
    live_stack.kill("agent", signal.SIGTERM)

    reaper = "system:reaper"
    node_actor = f"node:{node_id}"
    assert flips(node_id)[:4] == [
        ("offline", "online", node_actor),
        ("online", "degraded", reaper),
        ("degraded", "offline", reaper),
        ("offline", "online", node_actor),
    ]
    assert [p for p in verify_ledger(check_chain=False).problems if p.startswith("nodes")] == []


def test_a_stopped_agents_waiting_claims_are_given_no_work(live_stack, tmp_path: Path):
    # The agent's slots wait in long-poll claims (25 s) on the hub; SIGTERM drains the node and
    # the agent exits, while the hub's threads serving those claims still wait. Work submitted
    # then must stay queued for another node, not be leased to one that is gone.
    agent, node_id = registered_agent(live_stack, tmp_path)
    live_stack.spawn("agent", [*agent, "run", "--allow-unsandboxed"])
    live_stack.wait_until("the node online", lambda: state(node_id) == "online", timeout=20)
    time.sleep(2)  # the slots' claims are waiting on the hub
    live_stack.kill("agent", signal.SIGTERM)
    assert state(node_id) == "draining"

    submitter = user_create(username="e2e-sub", roles=["submitter"])
    _, key = api_key_create(user=submitter, role="submitter", name="e2e")
    credits_grant(
        user_id=submitter.pk, amount=100_000, actor="test", reference="e2e", idempotency_key="g"
    )
    created = requests.post(
        f"{live_stack.url}/api/v1/jobs/",
        headers={"Authorization": f"Bearer {key}"},
        json={"kind": "script", "script": "true", "timeout_s": 60, "price_ceiling": 500},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    time.sleep(3)  # ample for a waiting claim to be woken by the submission and take the task
    assert not Attempt.objects.filter(node_id=node_id).exists()
    assert Task.objects.get(job_id=created.json()["id"]).state == "queued"
