"""Routing: which nodes a request may go to, and in what order. Nodes report their inference
state with their poll (the real endpoint, into real Redis); the catalog's rule says which can
hold the model; a failed load is remembered against the model's file and the node's memory."""

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

from inference import relay
from inference.catalog import model_register
from inference.models import InferenceModel
from inference.routing import candidates, unfit_marker
from ledger.pricing import rules_at
from nodes.models import Node
from tests.inference.conftest import price_tokens
from tests.jobs.conftest import online_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def model(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path
    model = model_register(
        InferenceModel(
            name="tiny", quantization="F32", context_length=512, ram_mb=1024,
            file=SimpleUploadedFile("tiny.gguf", b"GGUF tiny"),
        )
    )  # fmt: skip
    price_tokens({"tiny": (1_000_000, 2_000_000)})
    yield model
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in client.scan_iter(f"{relay.PREFIX}:*"):
        client.delete(key)


def _poll(agent, **state):
    response = agent.post("/api/v1/agent/inference/poll", {"wait": 0, **state}, format="json")
    assert response.status_code == 204, response.content


def test_loaded_first_then_the_more_reliable_then_the_cheaper(model, bob):
    nodes = {}
    for name, region in (("cold", "IN"), ("warm", "IN"), ("steady", "IN"), ("dear", "US")):
        nodes[name] = online_node(bob, name=name, region=region, ram_mb=64000)
    Node.objects.filter(pk=nodes["steady"][0].pk).update(reliability=0.99)
    Node.objects.filter(pk=nodes["dear"][0].pk).update(reliability=0.99)
    for name, (_, agent) in nodes.items():
        _poll(agent, models_loaded=["tiny"] if name == "warm" else [])
    rules = rules_at()
    found = candidates(model, rules)
    order = [c.node_id for c in found]
    assert order[0] == nodes["warm"][0].pk  # it has the model loaded
    # Then reliability; at equal reliability, the lower price (the US multiplier is higher).
    rates = {c.node_id: c.rate_out for c in found}
    assert rates[nodes["dear"][0].pk] > rates[nodes["steady"][0].pk]
    assert order[1:] == [nodes["steady"][0].pk, nodes["dear"][0].pk, nodes["cold"][0].pk]
    # A price ceiling leaves out the dearer node.
    ceiling = rates[nodes["steady"][0].pk]
    assert nodes["dear"][0].pk not in {
        c.node_id for c in candidates(model, rules, max_output_price=ceiling)
    }


def test_only_polling_nodes_that_can_hold_it_and_are_not_draining(model, bob):
    polling, agent = online_node(bob, name="polling", ram_mb=64000)
    online_node(bob, name="silent", ram_mb=64000)  # never polls
    _, small_agent = online_node(bob, name="small", ram_mb=1024, gpu_vram_mb=None)  # no room
    _, draining_agent = online_node(bob, name="draining", ram_mb=64000)
    _poll(agent)
    _poll(small_agent)
    _poll(draining_agent, status="draining")
    assert [c.node_id for c in candidates(model, rules_at())] == [polling.pk]
    Node.objects.filter(pk=polling.pk).update(state="offline")
    assert candidates(model, rules_at()) == []


def test_a_failed_load_bars_the_node_until_the_model_or_its_memory_changes(model, bob):
    node, agent = online_node(bob, ram_mb=64000)
    _poll(agent)
    marker = unfit_marker(model, gpu_vram_mb=node.gpu_vram_mb, ram_mb=node.ram_mb)
    async_to_sync(relay.unfit_put)(node.pk, "tiny", marker)
    assert candidates(model, rules_at()) == []
    Node.objects.filter(pk=node.pk).update(ram_mb=128000)  # more memory: another chance
    assert [c.node_id for c in candidates(model, rules_at())] == [node.pk]
    Node.objects.filter(pk=node.pk).update(ram_mb=64000)
    model.sha256 = "0" * 64  # a new file for the model: another chance
    assert [c.node_id for c in candidates(model, rules_at())] == [node.pk]
