import json
from pathlib import Path

import pytest
from django.test import override_settings
from django.urls import reverse

from nodes import hooks
from nodes.auth import resolve_agent_key
from nodes.models import Node, NodeState
from nodes.signing import hub_public_key_b64
from people.keys import hash_key
from tests.conftest import client_with_key, key_for
from tests.nodes.conftest import beat, benchmark_pass, capabilities, node_events, register_node

pytestmark = pytest.mark.django_db


def register(client, **body):
    payload = {"name": "rig-1", "region": "IN", "capabilities": capabilities()} | body
    return client.post("/api/v1/nodes/", payload, format="json")


def test_it_registers_a_node_and_shows_its_agent_key_once(api, bob, settings):
    response = register(api(bob, "operator"))
    assert response.status_code == 201, response.content
    body = response.json()
    node = Node.objects.get()
    assert body["node"]["id"] == node.pk
    # Paid and routed as cpu until its first benchmark passes; its GPU's name is its claim.
    assert (body["node"]["state"], body["node"]["tier"]) == ("offline", "cpu")
    assert body["node"]["claimed_tier"] == "rtx-4090" and body["node"]["measured"] == {}
    assert body["agent_key"].startswith("cpa_") and len(body["agent_key"]) > 40
    assert body["hub_public_key"] == hub_public_key_b64()
    assert body["heartbeat_interval_s"] == settings.NODE_HEARTBEAT_INTERVAL_S
    # Stored hashed: the plaintext is nowhere in the row.
    assert node.agent_key.key_hash == hash_key(body["agent_key"])
    row = Node.objects.filter(pk=node.pk).values().get()
    assert not any(body["agent_key"] in str(value) for value in row.values())
    assert node_events(node)[0][0] == "NodeRegistered"
    assert node.event_version == 1
    # Listing the node later shows its key's prefix, never the key.
    listed = api(bob, "operator").get(f"/api/v1/nodes/{node.pk}").json()
    assert "agent_key" not in listed and listed["agent_key_prefix"] == body["agent_key"][:12]


def test_it_authenticates_an_agent_key_in_one_query(bob, django_assert_num_queries):
    node, key = register_node(bob)
    with django_assert_num_queries(1):
        user, auth = resolve_agent_key(key)
    assert auth == node
    with django_assert_num_queries(1):  # the operator is loaded only when something reads it
        assert user.username == "bob"


def test_the_node_an_agent_key_yields_is_the_one_the_orm_loads(bob):
    # Made from the key lookup's own row (nodes/sql/agent_key_node.sql): every field must hold
    # what the ORM's load holds, JSON fields parsed, and the instance must be a saved one.
    node, key = register_node(bob)
    assert beat(client_with_key(key)).status_code == 200  # load, GPU state: JSON filled in
    _, made = resolve_agent_key(key)
    loaded = Node.objects.get(pk=node.pk)
    for field in Node._meta.concrete_fields:
        assert getattr(made, field.attname) == getattr(loaded, field.attname), field.name
    assert isinstance(made.capabilities, dict) and made.capabilities
    assert (made._state.adding, made._state.db) == (False, "default")


@pytest.mark.parametrize(("user", "role"), [("alice", "submitter"), ("carol", "finance")])
def test_it_registers_nodes_only_for_operator_keys(request, user, role):
    person = request.getfixturevalue(user)
    response = register(client_with_key(key_for(person, role)))
    assert response.status_code == 403
    assert not Node.objects.exists()


def test_it_refuses_mallorys_submitter_key_though_she_is_an_operator(mallory):
    assert register(client_with_key(key_for(mallory, "submitter"))).status_code == 403
    assert register(client_with_key(key_for(mallory, "operator"))).status_code == 201


def test_it_keeps_agent_keys_out_of_the_operator_api(bob, bobs_node):
    node, key = bobs_node
    agent = client_with_key(key)
    assert register(agent).status_code == 403
    assert agent.get("/api/v1/nodes/").status_code == 403
    assert agent.get(f"/api/v1/nodes/{node.pk}").status_code == 403
    assert agent.post(f"/api/v1/nodes/{node.pk}/retire").status_code == 403
    assert agent.get("/api/v1/me").status_code == 403  # never acts as the operator person
    assert Node.objects.count() == 1 and Node.objects.get().state == NodeState.OFFLINE


def test_it_refuses_a_request_without_a_key(client):
    response = client.post("/api/v1/nodes/", {}, content_type="application/json")
    assert response.status_code in (401, 403)
    assert response.json()["error"] in ("not_authenticated", "authentication_failed")


def test_it_lists_only_the_operators_own_nodes(api, bob, mallory):
    mine, _ = register_node(bob, name="bob-1")
    register_node(mallory, name="mallory-1")
    response = api(bob, "operator").get("/api/v1/nodes/")
    assert [n["name"] for n in response.json()["results"]] == ["bob-1"]
    assert response.json()["results"][0]["id"] == mine.pk


def test_it_hides_a_node_from_other_operators(api, bob, mallory):
    node, _key = register_node(bob)
    client = api(mallory, "operator")
    assert client.get(f"/api/v1/nodes/{node.pk}").status_code == 404
    assert client.patch(f"/api/v1/nodes/{node.pk}", {"name": "mine"}).status_code == 404
    assert client.post(f"/api/v1/nodes/{node.pk}/retire").status_code == 404
    assert client.get(f"/api/v1/nodes/{node.pk}/history").status_code == 404
    node.refresh_from_db()
    assert (node.name, node.state, node.key_revoked_at) == ("rig-1", NodeState.OFFLINE, None)
    assert [t for t, _ in node_events(node)] == ["NodeRegistered", "NodeTierMeasured"]
    # A node id that does not exist reads the same as someone else's.
    assert client.get("/api/v1/nodes/999999").status_code == 404


def test_it_renames_a_node_with_an_event(api, bob, bobs_node):
    node, _ = bobs_node
    response = api(bob, "operator").patch(f"/api/v1/nodes/{node.pk}", {"name": "big rig"})
    assert response.status_code == 200 and response.json()["name"] == "big rig"
    assert node_events(node)[-1] == ("NodeRenamed", {"name": "big rig", "previous": "rig-1"})


def test_it_sets_a_price_floor_at_registration_and_later(api, bob):
    client = api(bob, "operator")
    assert register(client, price_floor=12).json()["node"]["price_floor"] == 12
    node = Node.objects.get()
    response = client.patch(f"/api/v1/nodes/{node.pk}", {"price_floor": 30, "name": "fast"})
    assert response.status_code == 200
    assert (response.json()["price_floor"], response.json()["name"]) == (30, "fast")
    assert node_events(node)[-2:] == [
        ("NodeRenamed", {"name": "fast", "previous": "rig-1"}),
        ("NodePriceFloorSet", {"price_floor": 30, "previous": 12}),
    ]
    node.refresh_from_db()
    assert node.event_version == 3


@pytest.mark.parametrize(
    "body", [{}, {"price_floor": -1}, {"price_floor": "cheap"}, {"price_floor": 10**10}]
)
def test_it_refuses_a_bad_update(api, bob, bobs_node, body):
    node, _ = bobs_node
    response = api(bob, "operator").patch(f"/api/v1/nodes/{node.pk}", body, format="json")
    assert response.status_code == 400, response.content
    assert len(node_events(node)) == 2


@pytest.mark.parametrize("name", ["", "x" * 101, "a\nb"])
def test_it_refuses_a_bad_name(api, bob, bobs_node, name):
    node, _ = bobs_node
    response = api(bob, "operator").patch(f"/api/v1/nodes/{node.pk}", {"name": name})
    assert response.status_code == 400 and "name" in response.json()["fields"]


def test_it_revokes_the_agent_key_on_retirement(api, bob, bobs_node):
    node, key = bobs_node
    assert beat(client_with_key(key)).status_code == 200
    gone: list[list[int]] = []
    hooks.register_offline_hook(gone.append)
    try:
        response = api(bob, "operator").post(f"/api/v1/nodes/{node.pk}/retire")
    finally:
        hooks.unregister(gone.append)
    assert response.status_code == 200 and response.json()["state"] == "retired"
    assert response.json()["key_revoked_at"] is not None
    assert gone == [[node.pk]]
    assert beat(client_with_key(key)).status_code == 401
    assert client_with_key(key).get("/api/v1/agent/me").status_code == 401
    assert node_events(node)[-1] == ("NodeRetired", {"from": "online", "to": "retired"})
    # Retiring again changes nothing and writes nothing.
    assert api(bob, "operator").post(f"/api/v1/nodes/{node.pk}/retire").status_code == 200
    assert [t for t, _ in node_events(node)].count("NodeRetired") == 1
    # A retired node cannot be renamed.
    response = api(bob, "operator").patch(f"/api/v1/nodes/{node.pk}", {"name": "again"})
    assert response.status_code == 409


def test_it_refuses_the_agent_keys_of_an_inactive_operator(bob, bobs_node):
    _node, key = bobs_node
    bob.is_active = False
    bob.save(update_fields=["is_active"])
    assert beat(client_with_key(key)).status_code == 401


def test_it_refuses_a_made_up_agent_key(bobs_node):
    assert beat(client_with_key("cpa_" + "x" * 43)).status_code == 401


def test_it_limits_the_nodes_of_an_operator(api, bob):
    client = api(bob, "operator")
    with override_settings(NODE_MAX_PER_OPERATOR=2):
        assert register(client).status_code == 201
        assert register(client).status_code == 201
        response = register(client)
        assert response.status_code == 409 and response.json()["error"] == "node_limit"
        # A retired node no longer counts.
        Node.objects.filter(pk=Node.objects.first().pk).update(state=NodeState.RETIRED)
        assert register(client).status_code == 201


def test_it_lists_the_history_newest_first(api, bob, bobs_node):
    node, key = bobs_node
    beat(client_with_key(key))
    beat(client_with_key(key), status="draining")
    response = api(bob, "operator").get(f"/api/v1/nodes/{node.pk}/history")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [(e["version"], e["type"]) for e in results] == [
        (4, "NodeStateChanged"),
        (3, "NodeStateChanged"),
        (2, "NodeTierMeasured"),
        (1, "NodeRegistered"),
    ]
    assert results[0]["payload"] == {"from": "online", "to": "draining", "reason": "agent_draining"}
    assert results[0]["actor"] == f"node:{node.pk}"


def test_it_shows_the_agent_its_own_node(bobs_node, settings):
    node, key = bobs_node
    response = client_with_key(key).get("/api/v1/agent/me")
    assert response.status_code == 200
    assert response.json() | {"capabilities": None} == {
        "id": node.pk,
        "name": "rig-1",
        "state": "offline",
        "tier": "rtx-4090",
        "reliability": 0.5,
        "region": "IN",
        "capabilities": None,
        "quarantine_reason": "",
        "cooldown_until": None,
        "heartbeat_interval_s": settings.NODE_HEARTBEAT_INTERVAL_S,
        "load": {},
    }
    assert response.json()["capabilities"]["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"


def test_it_keeps_operator_keys_out_of_the_agent_api(api, bob, bobs_node):
    client = api(bob, "operator")
    assert client.get("/api/v1/agent/me").status_code == 403
    assert beat(client).status_code == 403


def test_the_admin_lists_a_nodes_key_by_prefix_not_by_plaintext(client, dave, bob):
    from nodes.models import AgentKey

    node, key = register_node(bob)
    client.force_login(dave)
    page = client.get(reverse("admin:nodes_agentkey_changelist")).content.decode()
    assert node.agent_key_prefix in page and key not in page
    assert AgentKey.objects.get(node=node).key_hash == hash_key(key)


def test_it_registers_the_report_an_agent_made_on_a_real_h200(api, bob):
    """The capabilities JSON `detect_capabilities()` produced on an NVIDIA H200 (captured by
    scripts/capture_gpu.py; tests/agent/fixtures/hardware/SOURCES.md), sent as the agent sends
    it. No tier names the H200, so its 140 GB claim the largest generic tier; it is paid as cpu
    until its benchmark, then as the best tier whose range the H200's real figures meet
    (tests/agent/fixtures/benchmark/: 63.8 TFLOPS, 142592 MB allocatable): the RTX 4090's."""
    fixtures = Path(__file__).parents[1] / "agent/fixtures"
    report = json.loads((fixtures / "hardware/agent/h200-driver580-detection.json").read_text())
    response = register(api(bob, "operator"), capabilities=report["detect_capabilities"])
    assert response.status_code == 201, response.content
    node = Node.objects.get()
    assert (node.claimed_tier, node.tier, node.gpu_count) == ("generic-24gb", "cpu", 0)
    runs = json.loads((fixtures / "benchmark/h200-driver580-runs.json").read_text())
    measured = runs[0]["report"]["gpus"][0]
    benchmark_pass(
        node,
        gpus=[
            {
                "name": measured["name"],
                "fp32_tflops": measured["fp32"]["tflops"],
                "vram_mb": measured["vram_allocatable"]["mb"],
                "compute_capability": measured["compute_capability"],
            }
        ],
    )
    assert Node.objects.filter(pk=node.pk).values(
        "tier", "gpu_count", "gpu_name", "gpu_vram_mb", "compute_capability", "driver_version"
    ).get() == {
        "tier": "rtx-4090",
        "gpu_count": 1,
        "gpu_name": "NVIDIA H200",
        "gpu_vram_mb": 143771,
        "compute_capability": 90,
        "driver_version": "580.159.04",
    }
    node.refresh_from_db()
    assert (node.fp16_ok, node.cpu_cores, node.avx512) == (True, 16, True)
