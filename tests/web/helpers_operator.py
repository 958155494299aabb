"""A working operator for the operator and finance page tests: a node registered and
benchmarked through the services, beating through the agent API, running a real task of a
submitter's job with its progress reported, and earnings from a real hold and settlement."""

from dataclasses import dataclass
from typing import Any

from jobs.models import Attempt
from tests.conftest import client_with_key, key_for
from tests.jobs.conftest import CREDITS, fund, job_body
from tests.ledger.economy_helpers import earn
from tests.nodes.conftest import beat, register_node
from tests.proof.conftest import min_cashout_minor

__all__ = ["Working", "min_cashout_minor", "with_earnings", "working_node"]


@dataclass
class Working:
    node: Any
    agent: Any  # an API client with the node's agent key
    attempt_id: int
    task_id: int


def working_node(submitter, operator, *, name: str = "bob-rig", progress: int = 40) -> Working:
    node, agent_key = register_node(operator, name=name)
    agent = client_with_key(agent_key)
    assert beat(agent, gpus=[{"index": 0, "temperature_c": 71.0}]).status_code == 200
    fund(submitter, 1_000 * CREDITS)
    created = client_with_key(key_for(submitter, "submitter")).post(
        "/api/v1/jobs/", job_body(), format="json"
    )
    assert created.status_code == 201, created.content
    lease = agent.post("/api/v1/agent/claim", {"wait": 0}, format="json")
    assert lease.status_code == 200, lease.content
    lease = lease.json()
    reported = agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/progress",
        {"lease_token": lease["lease_token"], "progress": progress},
        format="json",
    )
    assert reported.status_code == 200, reported.content
    node.refresh_from_db()
    return Working(
        node=node,
        agent=agent,
        attempt_id=lease["attempt_id"],
        task_id=Attempt.objects.get(pk=lease["attempt_id"]).task_id,
    )


def with_earnings(submitter, operator, amount: int, *, job_id: int = 7_000_001) -> None:
    earn(submitter, operator, amount, job_id=job_id)
