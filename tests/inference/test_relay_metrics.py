"""A relayed answer in /metrics: an agent (a thread here, speaking the agents' HTTP API) serves
a chat completion through the real relay and Redis; the hub counts the answer, its first token
and its tokens per second."""

import threading

import pytest

from tests.core.scraping import scrape, value
from tests.inference.conftest import chat

pytestmark = pytest.mark.django_db(transaction=True)

POLL, PUSH = "/api/v1/agent/inference/poll", "/api/v1/agent/inference/push"
ENTRIES = [
    {"k": "p", "v": 3},
    {"k": "t", "v": ["Hel", "lo"]},
    {"k": "t", "v": [" there"]},
    {"k": "e", "v": {"finish_reason": "stop", "prompt_tokens": 3}},
]


def _serve_one(agent, failures: list) -> None:
    try:
        answer = agent.post(POLL, {"wait": 20}, format="json")
        (assignment,) = answer.json()["assignments"]
        push = {
            "request_id": assignment["request_id"],
            "attempt": assignment["attempt"],
            "entries": ENTRIES,
        }
        pushed = agent.post(PUSH, {"pushes": [push]}, format="json")
        assert pushed.status_code == 200, pushed.content
    except Exception as exc:  # the test's thread reports it
        failures.append(exc)


def test_a_relayed_answer_is_counted_with_its_first_token_and_its_rate(
    relay_world, submitter, client
):
    _, agent = relay_world
    # The node polls once, so routing knows it serves.
    assert agent.post(POLL, {"wait": 0}, format="json").status_code == 204
    failures: list = []
    serving = threading.Thread(target=_serve_one, args=(agent, failures))
    serving.start()
    before = scrape(client)
    response = chat(submitter)
    serving.join(30)
    assert not failures, failures
    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["message"]["content"] == "Hello there"
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("computepool_relay_requests_total", outcome="served", stream="false") == 1
    assert grew("computepool_relay_requests_total", outcome="failed", stream="false") == 0
    assert grew("computepool_relay_tokens_total") == 3
    assert grew("computepool_relay_first_token_seconds_count") == 1
    assert 0 < grew("computepool_relay_first_token_seconds_sum") < 30
    assert grew("computepool_relay_tokens_per_second_count") == 1


def test_a_request_no_node_answers_is_counted_as_failed(relay_world, submitter, client, settings):
    settings.INFERENCE_FIRST_TOKEN_S = 1
    _, agent = relay_world
    # The node polls once, is given the request, and never answers it.
    assert agent.post(POLL, {"wait": 0}, format="json").status_code == 204
    before = scrape(client)
    assert chat(submitter).status_code == 503
    after = scrape(client)
    failed = {"outcome": "failed", "stream": "false"}
    assert value(after, "computepool_relay_requests_total", **failed) == (
        value(before, "computepool_relay_requests_total", **failed) + 1
    )
    first = "computepool_relay_first_token_seconds_count"
    assert value(after, first) == value(before, first)
