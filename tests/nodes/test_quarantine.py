import pytest
from django.test import Client

from nodes.models import DriverBlock, GpuTier, Node, NodeState
from nodes.services import node_quarantine_lift, node_record_outcome
from tests.conftest import client_with_key
from tests.nodes.conftest import beat, gpu, node_events, register_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(dave) -> Client:
    client = Client()
    client.force_login(dave)
    return client


def test_it_quarantines_a_blocklisted_driver_at_registration(bob):
    DriverBlock.objects.create(vendor="nvidia", pattern="535.54.*", reason="corrupts fp16 results")
    node, key = register_node(bob, gpus=[gpu(driver_version="535.54.03")])
    assert node.state == NodeState.QUARANTINED
    assert node.quarantine_rule == "driver_blocklisted"
    assert "535.54.03" in node.quarantine_reason and "corrupts fp16" in node.quarantine_reason
    assert [t for t, _ in node_events(node)] == [
        "NodeRegistered",
        "NodeQuarantined",
        "NodeTierMeasured",
    ]
    # The operator sees why; the agent is told to stop claiming.
    assert beat(client_with_key(key)).json() | {"leases": None, "poll_interval_s": None} == {
        "poll_interval_s": None,
        "drain": True,
        "leases": None,
        "cancel": [],
        "state": "quarantined",
        "benchmark": False,
    }


@pytest.mark.parametrize(
    ("vendor", "pattern", "blocked"),
    [
        ("", "550.54.14", True),
        ("nvidia", "550.*", True),
        ("amd", "550.*", False),
        ("nvidia", "551.*", False),
        ("NVIDIA", "550.54.1?", True),
    ],
)
def test_it_matches_driver_blocks_by_vendor_and_pattern(bob, vendor, pattern, blocked):
    DriverBlock.objects.create(vendor=vendor, pattern=pattern, reason="bad")
    node, _ = register_node(bob)
    assert (node.state == NodeState.QUARANTINED) is blocked


def test_it_keeps_an_old_gpu_in_service_without_fp16(bob):
    node, _ = register_node(bob, gpus=[gpu("NVIDIA GeForce GTX 1080", 8192, "6.1")])
    assert (node.state, node.claimed_tier, node.fp16_ok) == (NodeState.OFFLINE, "gtx-1080", False)
    assert node.gpu_count == 1 and node.compute_capability == 61


def test_it_quarantines_nodes_running_a_driver_blocked_in_the_admin(bob, mallory, admin_client):
    hit, _ = register_node(bob, gpus=[gpu(driver_version="535.54.03")])
    miss, _ = register_node(mallory, gpus=[gpu(driver_version="550.54.14")])
    response = admin_client.post(
        "/admin/nodes/driverblock/add/",
        {
            "vendor": "nvidia",
            "pattern": "535.*",
            "reason": "known bad",
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    hit.refresh_from_db()
    miss.refresh_from_db()
    assert (hit.state, miss.state) == (NodeState.QUARANTINED, NodeState.OFFLINE)


def test_it_lets_an_admin_lift_a_quarantine_with_a_fresh_start(bob, admin_client):
    node, key = register_node(bob)
    client = client_with_key(key)
    for _ in range(3):
        beat(client, gpus=[{"index": 0, "throttled": True}])
        beat(client, gpus=[{"index": 0, "throttled": False}])
    for _ in range(3):
        node_record_outcome(node_id=node.pk, success=True)
    node.refresh_from_db()
    assert node.state == NodeState.QUARANTINED and node.reliability > 0.5
    response = admin_client.post(
        "/admin/nodes/node/",
        {
            "action": "lift_quarantine",
            "_selected_action": [node.pk],
        },
    )
    assert response.status_code == 302
    node.refresh_from_db()
    assert (node.state, node.quarantine_reason, node.thermal_events, node.reliability) == (
        NodeState.OFFLINE,
        "",
        [],
        0.5,
    )
    assert node_events(node)[-1] == (
        "NodeQuarantineLifted",
        {"from": "quarantined", "to": "offline"},
    )
    assert beat(client).json()["state"] == "online"
    # Lifting a node that is not quarantined does nothing.
    assert node_quarantine_lift(node=node, actor="test") is False


def test_it_quarantines_and_retires_from_the_admin(bob, admin_client):
    node, key = register_node(bob)
    admin_client.post("/admin/nodes/node/", {"action": "quarantine", "_selected_action": [node.pk]})
    node.refresh_from_db()
    assert (node.state, node.quarantine_rule) == (NodeState.QUARANTINED, "admin")
    admin_client.post("/admin/nodes/node/", {"action": "retire", "_selected_action": [node.pk]})
    node.refresh_from_db()
    assert node.state == NodeState.RETIRED and node.key_revoked_at is not None
    assert beat(client_with_key(key)).status_code == 401


@pytest.mark.parametrize("model", ["node", "gputier", "driverblock"])
def test_it_has_a_working_admin_for_every_model(bob, admin_client, model):
    register_node(bob)
    DriverBlock.objects.create(pattern="1.*", reason="x")
    assert admin_client.get(f"/admin/nodes/{model}/").status_code == 200
    pk = {"node": Node, "gputier": GpuTier, "driverblock": DriverBlock}[model].objects.first().pk
    assert admin_client.get(f"/admin/nodes/{model}/{pk}/change/").status_code == 200


def test_it_refuses_a_broken_pattern_in_the_tier_admin(admin_client):
    response = admin_client.post(
        "/admin/nodes/gputier/add/",
        {
            "slug": "broken",
            "label": "Broken",
            "kind": "named",
            "pattern": "rtx (40",
            "rank": "1",
        },
    )
    assert response.status_code == 200 and "Not a regular expression" in response.content.decode()
    assert not GpuTier.objects.filter(slug="broken").exists()


def test_it_allows_no_adding_or_deleting_nodes_in_the_admin(bob, admin_client):
    node, _ = register_node(bob)
    assert admin_client.get("/admin/nodes/node/add/").status_code == 403
    assert admin_client.get(f"/admin/nodes/node/{node.pk}/delete/").status_code == 403
