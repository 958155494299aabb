"""What the relay refuses, and how: hostile or mistaken input gets OpenAI's error shape and
leaves nothing behind (no request, no hold); an agent cannot push into a request it does not
hold. Real Redis (REDIS_URL) and PostgreSQL; no engine is needed to refuse."""

import pytest
import redis
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from inference import relay
from inference.models import InferenceRequest
from ledger.models import Event
from people.services import user_create
from tests.conftest import client_with_key, key_for
from tests.inference.conftest import chat
from tests.jobs.conftest import online_node

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_world")]


def _error(response, status, code=None):
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if code is not None:
        assert error["code"] == code
    return error


def test_bad_requests_are_refused_in_openais_shape_and_leave_nothing(submitter):
    events = Event.objects.count()
    assert _error(chat(submitter, model="no-such-model"), 404, "model_not_found")
    for bad in (
        {"messages": "hi"},
        {"messages": []},
        {"messages": [{"role": "wizard", "content": "hi"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
        {"max_tokens": 0},
        {"max_tokens": -5},
        {"max_tokens": 10**9},
        {"max_tokens": 500},  # more than the 512-token context leaves after the prompt
        {"temperature": "hot"},
        {"stream": "yes"},
        {"n": 3},
        {"stop": ["a"] * 10},
    ):
        assert _error(chat(submitter, **bad), 400)["type"] == "invalid_request_error", bad
    long = [{"role": "user", "content": "x" * 600}]
    assert _error(chat(submitter, messages=long), 400, "context_length_exceeded")
    raw = submitter.post("/v1/chat/completions", data=b"{not json",
                         content_type="application/json")  # fmt: skip
    _error(raw, 400)
    assert InferenceRequest.objects.count() == 0
    assert Event.objects.count() == events


def test_only_a_submitters_key_may_ask(bob, client):
    _error(chat(client_with_key(key_for(bob, "operator"))), 403)
    _error(chat(client), 401)
    _error(chat(client_with_key("cpk_not-a-key")), 401, "invalid_api_key")


def test_no_node_polling_means_429_with_retry_after(submitter):
    response = chat(submitter)
    _error(response, 429, "no_capacity")
    assert int(response["Retry-After"]) >= 1
    assert InferenceRequest.objects.count() == 0


def test_a_hold_the_credits_cannot_cover_is_402_and_nothing_is_held(relay_world):
    _, agent = relay_world
    # The node polls (and so is a candidate); the submitter has no credits.
    assert agent.post("/api/v1/agent/inference/poll", {"wait": 0}, format="json").status_code == 204
    broke = user_create(username="broke", roles=["submitter"])
    response = chat(client_with_key(key_for(broke, "submitter")))
    _error(response, 402, "insufficient_quota")
    assert InferenceRequest.objects.count() == 0


def test_the_poll_checks_what_the_agent_reports(relay_world):
    _, agent = relay_world
    for bad in ({"status": "asleep"}, {"slots": 0}, {"slots": 1, "current_load": 5},
                {"models_loaded": "tiny"}, {"wait": 3600}, {"free": 2}):  # fmt: skip
        response = agent.post("/api/v1/agent/inference/poll", {"wait": 0, **bad}, format="json")
        assert response.status_code == 400, bad
    submitter_key = client_with_key("cpk_not-a-key")
    assert submitter_key.post("/api/v1/agent/inference/poll", {}, format="json").status_code == 401


def test_an_agent_cannot_push_into_a_request_it_does_not_hold(relay_world, bob):
    node, agent = relay_world
    _, other_agent = online_node(bob, ram_mb=64000)

    def push(client, request_id, attempt, entries=None):
        entries = entries or [{"k": "t", "v": ["stolen"]}]
        body = {"pushes": [{"request_id": request_id, "attempt": attempt, "entries": entries}]}
        return client.post("/api/v1/agent/inference/push", body, format="json")

    # No such request at all.
    response = push(agent, 999999, 1)
    assert response.status_code == 409 and response.json() == {"results": {"999999": "refused"}}
    # A request in force on `node`: another node's key, or a stale attempt, is refused.
    from asgiref.sync import async_to_sync

    key_hash = node.agent_key.key_hash
    async_to_sync(relay.assign)(424242, 2, node.pk, key_hash, {"model": {"name": "tiny"}})
    for client, attempt in ((other_agent, 2), (agent, 1)):
        response = push(client, 424242, attempt)
        assert response.status_code == 409, response.content
        assert response.json() == {"results": {"424242": "refused"}}
    stream = redis.Redis.from_url(django_settings.REDIS_URL)
    assert stream.xlen(f"{relay.PREFIX}:o:424242:2") == 0
    assert stream.xlen(f"{relay.PREFIX}:o:424242:1") == 0
    # Malformed entries, or one request twice, are refused whole; the holder's push goes through.
    assert push(agent, 424242, 2, [{"k": "e", "v": {"finish_reason": "bored"}}]).status_code == 400
    twice = {"pushes": [{"request_id": 424242, "attempt": 2, "entries": []}] * 2}
    assert agent.post("/api/v1/agent/inference/push", twice, format="json").status_code == 400
    assert stream.xlen(f"{relay.PREFIX}:o:424242:2") == 0
    response = push(agent, 424242, 2)
    assert response.json() == {"results": {"424242": "ok"}}
    assert stream.xlen(f"{relay.PREFIX}:o:424242:2") == 1
    # Without a key, nothing is read at all.
    assert push(APIClient(), 424242, 2).status_code == 401
