import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import transaction

from ledger import registry
from ledger.models import Event
from ledger.verify import verify_ledger
from nodes import hooks
from nodes.models import Node, NodeState
from nodes.services import Rule, liveness, node_quarantine, nodes_reap
from nodes.tasks import reap
from tests.conftest import client_with_key
from tests.nodes.conftest import Statements, beat, node_events, register_node

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def online(bob, settings):
    """Three of bob's nodes that beat at T0 (interval 30 s, grace 5 s): degraded after T0+35 s,
    offline after T0+95 s."""
    settings.NODE_HEARTBEAT_INTERVAL_S = 30
    settings.NODE_HEARTBEAT_GRACE_S = 5
    nodes = []
    with time_machine.travel(T0, tick=False):
        for i in range(3):
            node, key = register_node(bob, name=f"rig-{i}")
            beat(client_with_key(key))
            nodes.append(node)
    return nodes


def states(nodes) -> list[str]:
    return [Node.objects.get(pk=n.pk).state for n in nodes]


def test_it_moves_nothing_before_a_deadline(online):
    assert nodes_reap(now=T0 + timedelta(seconds=35)) == (0, 0)
    assert states(online) == ["online"] * 3


def test_it_degrades_after_a_missed_beat_and_goes_offline_after_three(online):
    result = nodes_reap(now=T0 + timedelta(seconds=36))
    assert (result.degraded, result.offline) == (3, 0)
    assert states(online) == ["degraded"] * 3
    result = nodes_reap(now=T0 + timedelta(seconds=96))
    assert (result.degraded, result.offline) == (0, 3)
    assert states(online) == ["offline"] * 3
    for node in online:
        assert [(p["from"], p["to"]) for _, p in node_events(node) if "from" in p] == [
            ("offline", "online"),
            ("online", "degraded"),
            ("degraded", "offline"),
        ]
        # Registered, its GPU measured, then the three moves.
        assert Node.objects.get(pk=node.pk).event_version == 5
    assert Event.objects.filter(actor="system:reaper").count() == 6


def test_it_takes_a_node_past_both_deadlines_straight_offline(online):
    result = nodes_reap(now=T0 + timedelta(seconds=500))
    assert (result.degraded, result.offline) == (0, 3)
    assert node_events(online[0])[-1][1] == {
        "from": "online",
        "to": "offline",
        "reason": "missed_heartbeats",
    }


def test_it_changes_and_writes_nothing_when_fired_twice(online):
    later = T0 + timedelta(seconds=96)
    nodes_reap(now=later)
    events = Event.objects.count()
    versions = list(Node.objects.order_by("pk").values_list("event_version", "state_changed_at"))
    assert nodes_reap(now=later) == (0, 0)
    assert nodes_reap(now=later + timedelta(hours=1)) == (0, 0)
    assert Event.objects.count() == events
    assert (
        list(Node.objects.order_by("pk").values_list("event_version", "state_changed_at"))
        == versions
    )


def test_it_moves_only_silent_live_nodes(online, bob):
    with time_machine.travel(T0 + timedelta(seconds=60), tick=False):
        quiet, _ = register_node(bob, name="never-beat")  # offline: nothing to reap
        node_quarantine(node=online[2], rule=Rule.ADMIN, reason="x", actor="test")
        nodes_reap()
    assert states(online) == ["degraded", "degraded", "quarantined"]
    assert Node.objects.get(pk=quiet.pk).state == "offline"
    assert [t for t, _ in node_events(quiet)] == ["NodeRegistered", "NodeTierMeasured"]


def test_it_takes_a_silent_draining_node_offline(online):
    key_node = online[0]
    Node.objects.filter(pk=key_node.pk).update(state=NodeState.DRAINING)
    nodes_reap(now=T0 + timedelta(seconds=60))
    assert Node.objects.get(pk=key_node.pk).state == NodeState.DRAINING  # not "degraded"
    nodes_reap(now=T0 + timedelta(seconds=96))
    assert Node.objects.get(pk=key_node.pk).state == NodeState.OFFLINE


def test_it_calls_the_offline_hook_with_the_nodes_that_just_went_offline(online):
    calls: list[tuple[list[int], bool]] = []

    def reclaim(node_ids):
        calls.append((sorted(node_ids), transaction.get_connection().in_atomic_block))

    hooks.register_offline_hook(reclaim)
    try:
        nodes_reap(now=T0 + timedelta(seconds=36))
        nodes_reap(now=T0 + timedelta(seconds=96))
        nodes_reap(now=T0 + timedelta(seconds=96))
    finally:
        hooks.unregister(reclaim)
    assert calls == [(sorted(n.pk for n in online), True)]


def test_it_rolls_the_transition_back_when_the_offline_hook_fails(online):
    def broken(node_ids):
        raise RuntimeError("jobs is down")

    hooks.register_offline_hook(broken)
    try:
        with pytest.raises(RuntimeError):
            nodes_reap(now=T0 + timedelta(seconds=96))
    finally:
        hooks.unregister(broken)
    assert states(online) == ["online"] * 3
    assert not Event.objects.filter(actor="system:reaper").exists()
    assert nodes_reap(now=T0 + timedelta(seconds=96)).offline == 3


def test_its_events_are_written_as_the_door_writes_any_event_and_verify(online):
    nodes_reap(now=T0 + timedelta(seconds=36))
    nodes_reap(now=T0 + timedelta(seconds=96))
    events = Event.objects.filter(actor="system:reaper")
    assert events.count() == 6
    for event in events:
        assert event.fingerprint is None  # written under no idempotency key
        assert event.schema_version == registry.get(event.type).schema_version
        assert event.txid is not None
    assert verify_ledger().problems == []


@pytest.mark.postgres
def test_it_moves_a_fleet_larger_than_a_batch_a_batch_per_transaction(pg, online, monkeypatch):
    monkeypatch.setattr(liveness, "REAP_BATCH", 2)
    calls: list[tuple[int, bool]] = []

    def count(node_ids):
        calls.append((len(node_ids), transaction.get_connection().in_atomic_block))

    hooks.register_offline_hook(count)
    try:
        assert nodes_reap(now=T0 + timedelta(seconds=96)) == (0, 3)
    finally:
        hooks.unregister(count)
    assert calls == [(2, True), (1, True)]
    assert states(online) == ["offline"] * 3
    assert sorted(Node.objects.values_list("event_version", flat=True)) == [4, 4, 4]
    assert Event.objects.filter(actor="system:reaper").count() == 3


def test_it_runs_as_many_statements_for_a_large_fleet_as_a_small_one(bob, settings):
    """Set-based: a handful of statements for 5 nodes as for 600. (600 events go through one
    COPY, which the capture does not see; 5 through one INSERT.)"""
    settings.NODE_HEARTBEAT_INTERVAL_S = 30
    counts = {}
    for size in (5, 600):
        Node.objects.all().update(state=NodeState.RETIRED)
        with time_machine.travel(T0, tick=False):
            for i in range(size):
                _node, _ = register_node(bob, name=f"n{i}")
            Node.objects.filter(state=NodeState.OFFLINE).update(
                state=NodeState.ONLINE, degraded_after=T0, offline_after=T0 + timedelta(1)
            )
        with Statements() as statements:
            assert nodes_reap(now=T0 + timedelta(seconds=1)).degraded == size
        counts[size] = len(statements)
    assert counts[600] <= counts[5] <= 5, counts
    assert Event.objects.filter(actor="system:reaper").count() == 605


def test_it_reaps_from_the_celery_task(online):
    with time_machine.travel(T0 + timedelta(seconds=96), tick=False):
        assert reap() == {"degraded": 0, "offline": 3}
        assert reap() == {"degraded": 0, "offline": 0}


def _manage_check(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "REDIS_URL"}}
    base.update({"COMPUTEPOOL_VAR_DIR": str(tmp_path), "DEBUG": "1", **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NODE_HEARTBEAT_INTERVAL_S": "soon"}, "NODE_HEARTBEAT_INTERVAL_S='soon' is not an"),
        ({"NODE_REAPER_INTERVAL_S": "0"}, "NODE_REAPER_INTERVAL_S=0 is below the minimum 1"),
        (
            {"NODE_OFFLINE_AFTER_MISSED": "1", "NODE_DEGRADED_AFTER_MISSED": "2"},
            "NODE_OFFLINE_AFTER_MISSED=1 must not be below NODE_DEGRADED_AFTER_MISSED=2",
        ),
        ({"NODE_MAX_ERROR_RATE_PCT": "120"}, "NODE_MAX_ERROR_RATE_PCT=120 is above the maximum"),
        ({"HUB_SIGNING_KEY": "not base64!"}, "HUB_SIGNING_KEY is not valid base64"),
        ({"HUB_SIGNING_KEY": "c2hvcnQ="}, "HUB_SIGNING_KEY must be 32 bytes"),
    ],
)
def test_it_stops_startup_on_a_bad_setting_naming_the_variable(env, message, tmp_path):
    result = _manage_check(env, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
