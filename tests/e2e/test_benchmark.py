"""The cheating operator, end to end: an agent that names an RTX 4090 on a machine with no GPU
registers with a live hub, the hub issues it a benchmark, the agent's own benchmark code runs in
its real sandbox (bubblewrap), and the hub pays the node as what it measured: cpu."""

import os
import shutil

import pytest
import requests

from agent.benchmarking import BenchmarkService
from agent.client import HubClient
from agent.detect import detect_capabilities
from ledger.models import Event
from nodes.models import Node
from people.services import api_key_create, user_create

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RTX_4090 = {
    "index": 0,
    "name": "NVIDIA GeForce RTX 4090",
    "vendor": "nvidia",
    "uuid": "GPU-00000000-0000-0000-0000-000000004090",
    "vram_total_mb": 24564,
    "vram_free_mb": 24000,
    "compute_capability": "8.9",
    "driver_version": "550.54.14",
    "source": "nvml",
}


def test_a_cpu_machine_that_names_an_rtx_4090_is_measured_and_paid_as_cpu(live_stack):
    if shutil.which("bwrap") is None and os.environ.get("REQUIRE_BWRAP") == "1":
        pytest.fail("REQUIRE_BWRAP=1 but bubblewrap is not installed")
    operator = user_create(username="cheat-op", roles=["operator"])
    _, op_key = api_key_create(user=operator, role="operator", name="e2e")
    claimed = detect_capabilities().to_dict() | {"gpus": [RTX_4090]}
    registered = requests.post(
        f"{live_stack.url}/api/v1/nodes/",
        json={"name": "not-a-4090", "region": "IN", "capabilities": claimed},
        headers={"Authorization": f"Bearer {op_key}"},
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    body = registered.json()
    assert (body["node"]["claimed_tier"], body["node"]["tier"]) == ("rtx-4090", "cpu")

    client = HubClient(live_stack.url, body["agent_key"])
    reply = client.heartbeat(status="available", load={}, gpus=[], leases=[])
    assert reply.benchmark is True
    service = BenchmarkService(client=client, hub_public_key=body["hub_public_key"], gpu=False)
    verdict = service.run_due()
    client.close()
    assert verdict is not None and verdict["state"] == "passed", verdict
    assert verdict["tier"] == "cpu" and verdict["figures"]["gpus"] == []
    assert verdict["figures"]["cpu_gflops"] > 0 and verdict["figures"]["memory_gb_per_s"] > 0

    node = Node.objects.get(pk=body["node"]["id"])
    assert (node.claimed_tier, node.tier, node.gpu_count) == ("rtx-4090", "cpu", 0)
    mismatch = Event.objects.get(stream=node.stream, type="NodeTierMismatch").payload
    assert mismatch["claimed_gpu"] == "NVIDIA GeForce RTX 4090"
    assert mismatch["measured_tier"] == "cpu"
    assert node.reliability < 0.5
