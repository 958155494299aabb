from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from nodes import hooks
from nodes.models import Node, NodeState
from nodes.services import node_heartbeat, nodes_reap
from tests.conftest import client_with_key
from tests.nodes.conftest import (
    Statements,
    beat,
    benchmark_pass,
    capabilities,
    gpu,
    node_events,
    register_node,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def throttled(flag: bool) -> list[dict]:
    return [
        {
            "index": 0,
            "utilization_pct": 99,
            "temperature_c": 91,
            "power_w": 300,
            "vram_free_mb": 1000,
            "throttled": flag,
        }
    ]


def test_it_brings_a_new_node_online_on_its_first_heartbeat(bobs_node, settings):
    node, key = bobs_node
    response = beat(
        client_with_key(key), load={"cpu_pct": 12.5, "mem_pct": 40, "running": 0, "slots": 1}
    )
    assert response.status_code == 200, response.content
    assert response.json() == {
        "poll_interval_s": settings.NODE_HEARTBEAT_INTERVAL_S,
        "drain": False,
        "leases": {},
        "cancel": [],
        "state": "online",
        "benchmark": False,
    }
    node.refresh_from_db()
    assert node.state == NodeState.ONLINE and node.load["cpu_pct"] == 12.5
    assert node_events(node)[-1] == (
        "NodeStateChanged",
        {"from": "offline", "to": "online", "reason": "heartbeat"},
    )


def test_it_sets_the_deadlines_from_the_interval_and_the_grace(bobs_node, settings):
    settings.NODE_HEARTBEAT_INTERVAL_S = 30
    settings.NODE_HEARTBEAT_GRACE_S = 5
    node, key = bobs_node
    with time_machine.travel(T0, tick=False):
        beat(client_with_key(key))
    node.refresh_from_db()
    assert node.last_heartbeat_at == T0
    assert node.degraded_after == T0 + timedelta(seconds=35)
    assert node.offline_after == T0 + timedelta(seconds=95)


def test_it_records_a_steady_heartbeat_with_authentication_and_one_update(
    bobs_node, django_assert_max_num_queries
):
    node, key = bobs_node
    client = client_with_key(key)
    beat(client)  # offline → online
    events = len(node_events(node))
    # No leases: the jobs hook (which extends leases with its own statement) has nothing to do.
    with django_assert_max_num_queries(2) as captured:
        response = beat(client, status="busy", gpus=throttled(False), leases=[])
    assert response.status_code == 200
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["SELECT", "UPDATE"]
    assert len(node_events(node)) == events  # heartbeats are not events


def test_it_changes_state_on_a_heartbeat_in_at_most_three_statements(bobs_node):
    _node, key = bobs_node
    with Statements() as statements:
        response = beat(client_with_key(key))  # offline → online: CAS + event
    assert response.status_code == 200
    assert len(statements) <= 3, statements.sql


def test_it_brings_a_degraded_or_offline_node_back_on_its_next_beat(bobs_node):
    node, key = bobs_node
    client = client_with_key(key)
    with time_machine.travel(T0, tick=False):
        beat(client)
    with time_machine.travel(T0 + timedelta(seconds=60), tick=False):
        nodes_reap()
        node.refresh_from_db()
        assert node.state == NodeState.DEGRADED
        assert beat(client).json()["state"] == "online"
    with time_machine.travel(T0 + timedelta(seconds=600), tick=False):
        nodes_reap()
        node.refresh_from_db()
        assert node.state == NodeState.OFFLINE
        assert beat(client).json()["state"] == "online"
    flips = [
        (p["from"], p["to"], p["reason"]) for t, p in node_events(node) if t == "NodeStateChanged"
    ]
    assert flips == [
        ("offline", "online", "heartbeat"),
        ("online", "degraded", "missed_heartbeats"),
        ("degraded", "online", "heartbeat"),
        ("online", "offline", "missed_heartbeats"),
        ("offline", "online", "heartbeat"),
    ]


def test_it_retries_a_heartbeat_that_lost_the_race_to_the_reaper(bobs_node):
    """The reaper moves the node between authentication (which read 'online') and the write."""
    node, key = bobs_node
    with time_machine.travel(T0, tick=False):
        beat(client_with_key(key))
    stale = Node.objects.get(pk=node.pk)
    assert stale.state == NodeState.ONLINE
    with time_machine.travel(T0 + timedelta(seconds=600), tick=False):
        nodes_reap()
        reply = node_heartbeat(node=stale, status="available", load={}, gpus=[], lease_tokens=[])
    assert reply.state == "online"
    assert node_events(node)[-1][1] == {"from": "offline", "to": "online", "reason": "heartbeat"}
    node.refresh_from_db()
    assert node.event_version == len(node_events(node))


def test_it_moves_a_draining_agents_node_to_draining_once(bobs_node):
    node, key = bobs_node
    client = client_with_key(key)
    beat(client)
    assert beat(client, status="draining").json()["state"] == "draining"
    assert beat(client, status="draining").json()["state"] == "draining"
    assert [p["to"] for t, p in node_events(node) if t == "NodeStateChanged"] == [
        "online",
        "draining",
    ]
    assert beat(client, status="available").json()["state"] == "online"


def test_it_degrades_a_node_whose_agent_reports_degraded(bobs_node):
    node, key = bobs_node
    assert beat(client_with_key(key), status="degraded").json()["state"] == "degraded"
    assert node_events(node)[-1][1]["reason"] == "agent_reported_degraded"


def test_it_lets_an_agent_key_act_only_as_its_own_node(bob, mallory):
    mine, my_key = register_node(bob)
    theirs, _ = register_node(mallory, name="mallory-1")
    response = client_with_key(my_key).post(
        "/api/v1/agent/heartbeat",
        {"status": "draining", "node_id": theirs.pk, "node": theirs.pk, "id": theirs.pk},
        format="json",
    )
    assert response.status_code == 200
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.state, theirs.state) == (NodeState.DRAINING, NodeState.OFFLINE)
    assert theirs.last_heartbeat_at is None
    assert [t for t, _ in node_events(theirs)] == ["NodeRegistered", "NodeTierMeasured"]
    # The operator API, where node ids are named, is closed to agent keys.
    assert client_with_key(my_key).get(f"/api/v1/nodes/{theirs.pk}").status_code == 403


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "status"),
        ({"status": "sleeping"}, "status"),
        ({"status": "available", "leases": "tok"}, "leases"),
        ({"status": "available", "leases": ["x" * 129]}, "leases"),
        ({"status": "available", "leases": ["t"] * 257}, "leases"),
        ({"status": "available", "gpus": throttled(False) * 17}, "gpus"),
        ({"status": "available", "load": {"running": -1}}, "load.running"),
        ({"status": "available", "capabilities": {"gpus": "many"}}, "capabilities.gpus"),
    ],
)
def test_it_answers_a_bad_heartbeat_with_400_and_records_nothing(bobs_node, body, field):
    node, key = bobs_node
    response = client_with_key(key).post("/api/v1/agent/heartbeat", body, format="json")
    assert response.status_code == 400
    assert any(name.startswith(field) for name in response.json()["fields"]), response.json()
    node.refresh_from_db()
    assert node.last_heartbeat_at is None


def test_it_answers_a_heartbeat_that_is_not_an_object_with_400(bobs_node):
    node, key = bobs_node
    response = client_with_key(key).post("/api/v1/agent/heartbeat", [], format="json")
    assert response.status_code == 400
    node.refresh_from_db()
    assert node.last_heartbeat_at is None


@pytest.mark.parametrize(
    "body",
    [
        {"status": "busy"},
        {"status": "draining", "load": {}},
        {
            "status": "available",
            "load": {"cpu_pct": 3.5, "mem_pct": 21.0, "running": 0, "slots": 1},
            "gpus": throttled(False),
            "leases": ["Zm9vYmFyLWxlYXNlLXRva2VuLTEyMzQ1Njc4"],
        },
        {"status": "available", "load": {"cpu_pct": "3.5", "running": "1"}},  # coerced
    ],
)
def test_it_accepts_the_heartbeats_agents_send(bobs_node, body):
    node, key = bobs_node
    response = client_with_key(key).post("/api/v1/agent/heartbeat", body, format="json")
    assert response.status_code == 200, response.content[:300]
    node.refresh_from_db()
    assert node.last_heartbeat_at is not None


def test_it_counts_a_throttling_gpu_once_however_many_samples(bobs_node):
    node, key = bobs_node
    client = client_with_key(key)
    for flag in (True, True, True, False, True):
        beat(client, gpus=throttled(flag))
    episodes = [p for t, p in node_events(node) if t == "NodeThermalThrottled"]
    assert episodes == [{"gpus": [0], "recent": 1}, {"gpus": [0], "recent": 2}]
    node.refresh_from_db()
    assert node.state == NodeState.ONLINE and len(node.thermal_events) == 2


def test_it_quarantines_a_node_after_three_throttle_episodes_in_a_day(bobs_node, settings):
    node, key = bobs_node
    client = client_with_key(key)
    for hour in range(3):
        with time_machine.travel(T0 + timedelta(hours=hour * 5), tick=False):
            beat(client, gpus=throttled(True))
            response = beat(client, gpus=throttled(False))
    assert response.json()["state"] == "quarantined" and response.json()["drain"] is True
    node.refresh_from_db()
    assert node.quarantine_rule == "thermal_throttling"
    assert "3 thermal-throttle episodes in 24 h" in node.quarantine_reason
    # It keeps beating (liveness recorded) but stays quarantined.
    with time_machine.travel(T0 + timedelta(hours=16), tick=False):
        assert beat(client).json()["state"] == "quarantined"
    node.refresh_from_db()
    assert node.last_heartbeat_at == T0 + timedelta(hours=16)


def test_it_forgets_throttle_episodes_older_than_the_window(bobs_node):
    node, key = bobs_node
    client = client_with_key(key)
    for day in range(4):
        with time_machine.travel(T0 + timedelta(hours=day * 13), tick=False):
            beat(client, gpus=throttled(True))
            beat(client, gpus=throttled(False))
    node.refresh_from_db()
    assert node.state == NodeState.ONLINE
    assert len(node.thermal_events) == 2  # at 26 h and 39 h; the window is 24 h


def test_it_merges_the_hooks_leases_and_cancellations_into_the_reply(bobs_node, monkeypatch):
    node, key = bobs_node
    monkeypatch.setattr(hooks, "_heartbeat_hooks", [])  # only this test's hooks
    seen = []

    def extend(hook_node, tokens):
        seen.append((hook_node.pk, tokens))
        return {
            "leases": {t: "2026-03-01T12:05:00+00:00" for t in tokens if t != "gone"},
            "cancel": ["gone"],
        }

    def cancel_more(hook_node, tokens):
        return {"cancel": ["gone", "other"]}

    hooks.register_heartbeat_hook(extend)
    hooks.register_heartbeat_hook(cancel_more)
    response = beat(client_with_key(key), leases=["a", "gone"])
    assert seen == [(node.pk, ["a", "gone"])]
    assert response.json()["leases"] == {"a": "2026-03-01T12:05:00+00:00"}
    assert response.json()["cancel"] == ["gone", "other"]


def test_it_writes_no_event_for_unchanged_capabilities(bobs_node):
    node, key = bobs_node
    beat(client_with_key(key), capabilities=capabilities(disk_free_mb=123))
    assert [t for t, _ in node_events(node)] == [
        "NodeRegistered",
        "NodeTierMeasured",
        "NodeStateChanged",
    ]
    node.refresh_from_db()
    assert (node.disk_mb, node.benchmark_due_id) == (123, None)


def test_it_records_new_hardware_with_an_event_and_measures_it_again(bobs_node):
    node, key = bobs_node
    caps = capabilities(gpus=[gpu("NVIDIA GeForce RTX 5090", 32607, "12.0")])
    assert beat(client_with_key(key), capabilities=caps).json()["benchmark"] is True
    node.refresh_from_db()
    # Paid as what was measured until the new GPU is measured in turn.
    assert (node.claimed_tier, node.tier, node.gpu_vram_mb) == ("rtx-5090", "rtx-4090", 24564)
    changed = [p for t, p in node_events(node) if t == "NodeCapabilitiesChanged"]
    assert changed[0]["tier"] == "rtx-4090" and changed[0]["previous_tier"] == "rtx-4090"
    assert node.benchmarks.get(pk=node.benchmark_due_id).reason == "hardware"
    benchmark_pass(node)
    node.refresh_from_db()
    assert (node.tier, node.gpu_vram_mb, node.compute_capability) == ("rtx-5090", 32607, 120)
    assert node_events(node)[-1][1] | {"benchmark_id": 0} == {
        "benchmark_id": 0,
        "tier": "rtx-5090",
        "previous_tier": "rtx-4090",
    }


def test_it_quarantines_a_node_reporting_less_vram_than_registered(bobs_node):
    node, key = bobs_node
    caps = capabilities(gpus=[gpu(vram_total_mb=8192)])
    response = beat(client_with_key(key), capabilities=caps)
    assert response.json()["state"] == "quarantined"
    node.refresh_from_db()
    assert node.quarantine_rule == "vram_mismatch"
    assert "8192 MB" in node.quarantine_reason and "24564 MB" in node.quarantine_reason
    assert node.event_version == len(node_events(node))


def test_it_stores_timezone_aware_times(bobs_node):
    node, key = bobs_node
    beat(client_with_key(key))
    node.refresh_from_db()
    assert timezone.is_aware(node.last_heartbeat_at) and timezone.is_aware(node.offline_after)


@pytest.mark.parametrize("region", ["xx", "XX", "zz"])
def test_a_region_that_is_not_a_country_is_a_400(bobs_node, region):
    node, key = bobs_node
    response = beat(client_with_key(key), region=region)
    assert response.status_code == 400, response.content
    assert "ISO 3166-1 alpha-2" in response.json()["fields"]["region"][0]
    node.refresh_from_db()
    assert (node.state, node.region) == (NodeState.OFFLINE, "IN")


def test_a_heartbeat_may_name_the_nodes_region_but_not_move_it(bobs_node):
    node, key = bobs_node
    assert beat(client_with_key(key), region="in").status_code == 200
    moved = beat(client_with_key(key), region="DE")
    assert moved.status_code == 400
    assert moved.json()["fields"]["region"] == [
        "this node registered in IN; a heartbeat cannot move it"
    ]
    node.refresh_from_db()
    assert node.region == "IN"
