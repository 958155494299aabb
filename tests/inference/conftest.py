"""Builders for inference tests: a relay world (a priced model, an online node, Redis) and a
funded submitter."""

import json

import pytest
import redis
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

from inference import relay
from inference.catalog import model_register

# A price book in force that prices models' tokens, as an admin publishes one.
from inference.catalog import token_prices_publish as price_tokens
from inference.models import InferenceModel
from ledger.funding import credits_grant
from tests.conftest import client_with_key, key_for
from tests.jobs.conftest import online_node

__all__ = ["chat", "price_tokens"]


@pytest.fixture
def relay_world(tmp_path, settings, bob):
    """The model `tiny`, priced, and bob's online node (node, agent client); the relay's Redis
    keys are removed afterwards."""
    if not django_settings.REDIS_URL:
        pytest.fail("the relay tests need Redis (REDIS_URL); scripts/test.sh provides one")
    settings.MEDIA_ROOT = tmp_path
    settings.INFERENCE_QUEUE_WAIT_S = 0
    model_register(
        InferenceModel(
            name="tiny", quantization="F32", context_length=512, ram_mb=64,
            file=SimpleUploadedFile("tiny.gguf", b"GGUF tiny"),
        )
    )  # fmt: skip
    price_tokens({"tiny": (1_000_000, 2_000_000)})  # 1 and 2 minor units a token
    node, agent = online_node(bob, ram_mb=64000)
    yield node, agent
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in client.scan_iter(f"{relay.PREFIX}:*"):
        client.delete(key)


@pytest.fixture
def submitter(alice):
    """alice with 1,000 credits and her submitter client."""
    credits_grant(user_id=alice.pk, amount=100_000, actor="test", reference="t",
                  idempotency_key="relay-grant")  # fmt: skip
    return client_with_key(key_for(alice, "submitter"))


def chat(client, **body):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **body}
    return client.post("/v1/chat/completions", data=json.dumps(body),
                       content_type="application/json")  # fmt: skip
