"""The operator's pause: a paused node drains, claims nothing and stays draining whatever its
agent reports, until resumed; the agent is told by its heartbeat's reply."""

import pytest

from nodes.models import Node, NodeState
from tests.conftest import client_with_key, key_for
from tests.jobs.conftest import CREDITS, claim, fund, job_body, online_node
from tests.nodes.conftest import beat, node_events, register_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitter(alice, api):
    fund(alice, 1_000 * CREDITS)
    return api(alice, "submitter")


def _operator(user):
    return client_with_key(key_for(user, "operator"))


def test_a_paused_node_drains_claims_nothing_and_resumes(submitter, bob):
    assert submitter.post("/api/v1/jobs/", job_body(), format="json").status_code == 201
    node, agent = online_node(bob)
    response = _operator(bob).post(f"/api/v1/nodes/{node.pk}/pause")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "draining" and response.json()["paused_at"]
    assert node_events(node)[-1] == ("NodePaused", {"from": "online", "to": "draining"})
    assert claim(agent).status_code == 204

    # The agent has not heard yet and says it is available: the beat keeps it draining and
    # tells it to drain.
    reply = beat(agent, status="available").json()
    assert reply["drain"] is True and reply["state"] == "draining"
    assert claim(agent).status_code == 204

    response = _operator(bob).post(f"/api/v1/nodes/{node.pk}/resume")
    assert response.status_code == 200 and response.json()["paused_at"] is None
    assert node_events(node)[-1] == ("NodeResumed", {"from": "draining", "to": "draining"})
    # Its next beat, still draining as it was told, learns the pause is over …
    reply = beat(agent, status="draining").json()
    assert reply["drain"] is False and reply["state"] == "draining"
    # … and the one after brings it back, and it takes the job.
    assert beat(agent, status="available").json()["state"] == "online"
    assert claim(agent).status_code == 200


def test_a_node_paused_while_offline_comes_back_draining(bob):
    node, key = register_node(bob)
    assert _operator(bob).post(f"/api/v1/nodes/{node.pk}/pause").json()["state"] == "offline"
    reply = beat(client_with_key(key), status="available").json()
    assert reply["state"] == "draining" and reply["drain"] is True
    assert node_events(node)[-1] == (
        "NodeStateChanged",
        {"from": "offline", "to": "draining", "reason": "operator_paused"},
    )


def test_pausing_twice_or_resuming_an_unpaused_node_writes_nothing(bob):
    node, _ = online_node(bob)
    client = _operator(bob)
    client.post(f"/api/v1/nodes/{node.pk}/pause")
    events = len(node_events(node))
    assert client.post(f"/api/v1/nodes/{node.pk}/pause").status_code == 200
    client.post(f"/api/v1/nodes/{node.pk}/resume")
    assert client.post(f"/api/v1/nodes/{node.pk}/resume").status_code == 200
    assert len(node_events(node)) == events + 1


def test_only_its_operator_pauses_a_node_and_a_retired_one_not_at_all(bob, mallory):
    node, _ = online_node(bob)
    assert _operator(mallory).post(f"/api/v1/nodes/{node.pk}/pause").status_code == 404
    node.refresh_from_db()
    assert node.paused_at is None and node.state == NodeState.ONLINE
    assert _operator(bob).post(f"/api/v1/nodes/{node.pk}/retire").status_code == 200
    response = _operator(bob).post(f"/api/v1/nodes/{node.pk}/pause")
    assert response.status_code == 409 and response.json()["error"] == "node_retired"
    assert Node.objects.get(pk=node.pk).paused_at is None
