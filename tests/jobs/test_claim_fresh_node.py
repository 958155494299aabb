"""A claim takes its node as the node is when it takes the task, not as it was when the claim
began: a waiting claim, or one that read its node a moment earlier, must not lease work to a
node that has since drained, at a floor it has since raised, at a spot price the market has
since moved, or on a trust it has since earned or lost."""

import threading
import time

import pytest
from django.db import connection

from jobs.claim import task_claim
from jobs.models import Attempt, Task
from jobs.node_profile import profile_for
from ledger.models import Event
from nodes.models import Node
from nodes.services.lifecycle import node_update
from tests.jobs.conftest import beat, claim, job_body, online_node

pytestmark = pytest.mark.django_db


def submit(client, **overrides) -> int:
    response = client.post("/api/v1/jobs/", job_body(**overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def claimed_price(lease) -> tuple[int, int]:
    """The price the attempt carries and the price its TaskClaimed event says."""
    attempt = Attempt.objects.get(pk=lease.attempt_id)
    event = Event.objects.get(type="TaskClaimed", payload__attempt_id=lease.attempt_id)
    return attempt.price_per_s, event.payload["price_per_s"]


def test_a_floor_raised_after_the_node_was_read_is_the_leases_price(submitter, bob):
    node, _ = online_node(bob)
    profile = profile_for(node)
    assert profile.price_per_s < 400
    node_update(node=Node.objects.get(pk=node.pk), price_floor=400, actor="test")
    submit(submitter, price_ceiling=500)
    lease = task_claim(profile=profile)
    assert lease is not None
    assert claimed_price(lease) == (400, 400)


def test_a_floor_raised_above_the_tasks_ceiling_leases_nothing(submitter, bob):
    node, _ = online_node(bob)
    profile = profile_for(node)
    node_update(node=Node.objects.get(pk=node.pk), price_floor=600, actor="test")
    submit(submitter, price_ceiling=500)
    assert task_claim(profile=profile) is None
    assert Task.objects.get().state == "queued"


def test_a_spot_price_moved_after_the_node_was_read_is_the_leases_price(submitter, bob):
    from ledger.pricing import spot_price_set

    node, _ = online_node(bob)
    profile = profile_for(node)
    moved = profile.price_per_s + 3
    spot_price_set(region=node.region, tier=node.tier, price=moved, reason="test", actor="test")
    submit(submitter, price_ceiling=500)
    lease = task_claim(profile=profile)
    assert lease is not None
    assert claimed_price(lease) == (moved, moved)


def test_a_node_that_drained_after_it_was_read_is_given_nothing(submitter, bob):
    node, agent = online_node(bob)
    profile = profile_for(node)
    assert profile.can_claim
    assert beat(agent, "draining").status_code == 200
    submit(submitter)
    assert task_claim(profile=profile) is None
    assert not Attempt.objects.exists()
    assert Task.objects.get().state == "queued"


def test_trust_earned_after_the_node_was_read_counts(submitter, bob, settings):
    # Untrusted nodes take only low-priority work; the node earns trust while its claim waits.
    node, _ = online_node(bob)
    Node.objects.filter(pk=node.pk).update(reliability=0.1)
    profile = profile_for(Node.objects.get(pk=node.pk))
    assert not profile.trusted
    submit(submitter, priority=5)
    Node.objects.filter(pk=node.pk).update(reliability=0.9)
    assert task_claim(profile=profile) is not None


def _waiting_claim(agent, wait: float, result: dict) -> threading.Thread:
    def run() -> None:
        started = time.monotonic()
        result["response"] = claim(agent, wait=wait)
        result["waited"] = time.monotonic() - started
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)  # the claim is waiting
    return thread


def test_a_waiting_claim_leases_at_the_floor_set_while_it_waited(
    submitter, bob, api, transactional_db, redis_wakeups
):
    node, agent = online_node(bob)
    result: dict = {}
    waiter = _waiting_claim(agent, 10, result)
    patched = api(bob, "operator").patch(
        f"/api/v1/nodes/{node.pk}/", {"price_floor": 400}, format="json"
    )
    assert patched.status_code == 200, patched.json()
    submit(submitter, price_ceiling=500)
    waiter.join(20)
    assert result["response"].status_code == 200
    attempt = Attempt.objects.get(pk=result["response"].json()["attempt_id"])
    assert attempt.price_per_s == 400


def test_a_drain_answers_the_nodes_waiting_claims_at_once_and_empty(
    submitter, bob, transactional_db, redis_wakeups
):
    node, agent = online_node(bob)
    result: dict = {}
    waiter = _waiting_claim(agent, 15, result)
    assert beat(agent, "draining").status_code == 200
    waiter.join(20)
    assert result["response"].status_code == 204
    # Ended by the drain, not by the 15 s wait running out (a wide margin for a busy machine).
    assert result["waited"] < 6, result["waited"]
    submit(submitter)
    time.sleep(0.5)
    assert not Attempt.objects.filter(node_id=node.pk).exists()
