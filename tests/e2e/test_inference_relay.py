"""Inference end to end: the official `openai` client on one hub process, real agents running
llama.cpp (the tiny model this test writes) connected to another hub process, tokens moved
between the two through Redis; the hold and settlement through the ledger, which verifies.

The hub processes are uvicorn (ASGI), as the relay is deployed; the stack's gunicorn hub,
worker and beat run beside them (registration, the reaper, sealing)."""

import contextlib
import io
import json
import os
import re
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path

import openai
import pytest
import redis
from django.utils import timezone

from inference import relay
from inference.billing import token_cost
from inference.catalog import model_register
from inference.models import InferenceModel, InferenceRequest, RequestState
from inference.tiny_model import write_tiny_model
from ledger.accounts import available_code, earnings_code
from ledger.funding import credits_grant
from ledger.models import Account, Event
from ledger.statements import statement_lines
from ledger.verify import verify_ledger
from people.services import api_key_create, user_create
from tests.e2e.conftest import LiveStack, free_port
from tests.inference.conftest import price_tokens

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "inference.md"
GRANT = 1_000_000
RATE_IN, RATE_OUT = 1, 2  # minor units a token (1 000 000 and 2 000 000 a million)
RELAY_ENV = {
    "INFERENCE_FIRST_TOKEN_S": "3",
    "INFERENCE_STALL_S": "3",
    "INFERENCE_QUEUE_WAIT_S": "10",
    "INFERENCE_POLL_WAIT_S": "5",
}


class Relay:
    def __init__(self, stack: LiveStack, client_url: str, agent_url: str, sub_key: str,
                 submitter_id: int, op_key: str, operator_id: int) -> None:  # fmt: skip
        self.stack, self.client_url, self.agent_url = stack, client_url, agent_url
        self.sub_key, self.submitter_id = sub_key, submitter_id
        self.op_key, self.operator_id = op_key, operator_id
        self.nodes: dict[str, int] = {}
        self.redis = redis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.client_url}/v1", api_key=self.sub_key, max_retries=0, timeout=60
        )

    def start_agent(self, name: str, tmp_path: Path) -> int:
        config = tmp_path / f"{name}.json"
        agent = ["-m", "agent", "--config", str(config)]
        registered = self.stack.run([*agent, "register", "--hub", self.stack.url, "--token",
                                     self.op_key, "--name", name])  # fmt: skip
        assert registered.returncode == 0, registered.stdout + registered.stderr
        settings = json.loads(config.read_text()) | {
            "hub_url": self.agent_url,  # the agent talks to the other hub process
            "work_dir": str(tmp_path / f"{name}-work"),
            "models_dir": str(tmp_path / f"{name}-models"),
            "inference_slots": 1,
        }
        config.write_text(json.dumps(settings))
        self.stack.spawn(name, [*agent, "run", "--sandbox", "bwrap"])
        node_id = settings["node_id"]
        self.nodes[name] = node_id
        return node_id

    def wait_polling(self, *node_ids: int) -> None:
        self.stack.wait_until(
            f"nodes {node_ids} to poll for inference",
            lambda: all(self.redis.exists(f"{relay.PREFIX}:n:{n}") for n in node_ids),
            timeout=60,
        )


@pytest.fixture
def relay_stack(live_stack: LiveStack, tmp_path: Path, settings) -> Relay:
    models = tmp_path / "models"
    models.mkdir()
    settings.INFERENCE_MODELS_DIR = models
    write_tiny_model(models / "tiny.gguf")
    model_register(InferenceModel(name="tiny", path="tiny.gguf", quantization="F32",
                                  context_length=2048, ram_mb=64))  # fmt: skip
    price_tokens({"tiny": (RATE_IN * 1_000_000, RATE_OUT * 1_000_000)})
    operator = user_create(username="relay-op", roles=["operator"])
    submitter = user_create(username="relay-sub", roles=["submitter"])
    _, op_key = api_key_create(user=operator, role="operator", name="relay")
    _, sub_key = api_key_create(user=submitter, role="submitter", name="relay")
    credits_grant(user_id=submitter.pk, amount=GRANT, actor="test", reference="relay",
                  idempotency_key="relay-grant")  # fmt: skip
    env = {**live_stack.env, **RELAY_ENV, "INFERENCE_MODELS_DIR": str(models)}
    live_stack.env = env  # the agents' and every later process's
    urls = []
    for name in ("relay-a", "relay-b"):
        port = free_port()
        live_stack.spawn(name, ["-m", "uvicorn", "computepool.asgi:application", "--host",
                                "127.0.0.1", "--port", str(port), "--lifespan", "off",
                                "--no-access-log"], env)  # fmt: skip
        urls.append(f"http://127.0.0.1:{port}")
    import requests

    for url in urls:
        live_stack.wait_until(
            f"{url}/healthz", lambda u=url: requests.get(f"{u}/healthz", timeout=2).ok, timeout=30
        )
    return Relay(live_stack, urls[0], urls[1], sub_key, submitter.pk, op_key, operator.pk)


def _stream(client: openai.OpenAI, **options) -> tuple[list[str], str | None, object]:
    pieces, finish, usage = [], None, None
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say something."}], temperature=0,
        stream=True, stream_options={"include_usage": True}, **options,
    )  # fmt: skip
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    return pieces, finish, usage


def _cost(request: InferenceRequest) -> int:
    """The request's tokens at the rates its closing event recorded (the book's, under the
    node's tier and region multipliers), recomputed here."""
    closed = Event.objects.get(stream=f"inference:{request.pk}", version=2).payload
    assert (closed["prompt_tokens"], closed["completion_tokens"]) == (
        request.prompt_tokens, request.completion_tokens,
    )  # fmt: skip
    assert closed["rate_in"] > 0 and closed["rate_out"] > 0
    return token_cost(prompt_tokens=request.prompt_tokens,
                      completion_tokens=request.completion_tokens,
                      rate_in=closed["rate_in"], rate_out=closed["rate_out"])  # fmt: skip


def _books_balance(r: Relay) -> None:
    requests_ = InferenceRequest.objects.filter(submitter_id=r.submitter_id)
    charged = sum(req.charged_minor for req in requests_)
    available = Account.objects.get(code=available_code(r.submitter_id)).balance
    assert available == GRANT - charged
    earned = Account.objects.filter(code=earnings_code(r.operator_id)).first()
    assert charged == 0 or (earned is not None and 0 < earned.balance <= charged)
    report = verify_ledger()
    assert report.ok, report.problems


def test_two_agents_serve_streamed_and_whole_answers_through_two_hubs(relay_stack, tmp_path):
    r = relay_stack
    nodes = [r.start_agent("agent-1", tmp_path), r.start_agent("agent-2", tmp_path)]
    r.wait_polling(*nodes)
    with r.client() as client:
        assert [m.id for m in client.models.list()] == ["tiny"]
        pieces, finish, usage = _stream(client, max_tokens=24)
        # Token by token: one chunk per token, as many as were asked for (greedy decoding of
        # this model never picks the end of text), and usage says so.
        assert len(pieces) == 24 and finish == "length"
        assert usage.completion_tokens == 24 and usage.prompt_tokens > 0
        whole = client.completions.create(model="tiny", prompt="pooled", max_tokens=10,
                                          temperature=0)  # fmt: skip
        assert whole.usage.completion_tokens == 10 and len(whole.choices[0].text) == 10
        # Two at once: each node has one slot, so the second goes to the other node.
        results: list = []
        threads = [
            threading.Thread(target=lambda: results.append(_stream(client, max_tokens=400)))
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert [len(pieces) for pieces, _, _ in results] == [400, 400]
    served = list(InferenceRequest.objects.order_by("id"))
    assert [req.state for req in served] == [RequestState.SERVED] * 4
    assert {req.node_id for req in served[2:]} == set(nodes)
    first = served[0]
    # What was billed is what the client was told, at the book's prices for the node.
    assert (first.prompt_tokens, first.completion_tokens) == (usage.prompt_tokens, 24)
    assert first.charged_minor == _cost(first)
    assert first.ttft_ms is not None
    _books_balance(r)
    # The submitter's statement shows each request's hold and settlement.
    now = timezone.now()
    lines = list(statement_lines(user_id=r.submitter_id, period_from=now - timedelta(hours=1),
                                 period_to=now + timedelta(hours=1)))  # fmt: skip
    for request in served:
        mine = [line for line in lines if line["ref"] == f"request:{request.pk}"]
        assert {line["kind"] for line in mine} == {"hold", "settlement"}
        assert sum(line["amount_minor"] for line in mine) == -request.charged_minor
    # The operator's view of one agent: what it keeps on disk and what it has loaded.
    config = r.stack.workdir / "agent-1.json"

    def listed() -> str | None:
        out = r.stack.run(["-m", "agent", "--config", str(config), "models"]).stdout
        return out if "loaded (the running agent's last heartbeat): tiny" in out else None

    assert "tiny  0.4 MB  sha256" in r.stack.wait_until("agent-1 to report tiny loaded", listed)

    # docs/inference.md's example, as written but for its hub and key.
    example = re.search(r"```python\n(.*?)```", DOCS.read_text(), re.S).group(1)
    example = example.replace("https://hub.example/v1", f"{r.client_url}/v1")
    example = example.replace('"cpk_…"', repr(r.sub_key))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, str(DOCS), "exec"), {})  # noqa: S102 - the page's own code
    assert printed.getvalue()
    assert InferenceRequest.objects.latest("id").completion_tokens == 64


def test_a_node_dead_before_its_first_token_is_replaced_unseen(relay_stack, tmp_path):
    r = relay_stack
    first = r.start_agent("agent-1", tmp_path)
    second = r.start_agent("agent-2", tmp_path)
    r.wait_polling(first, second)
    # agent-1 is the first choice (neither has the model loaded; the lower id goes first). It
    # is killed while the hub still counts it as polling: the request goes to it, no token
    # comes, and after INFERENCE_FIRST_TOKEN_S it moves to agent-2.
    r.stack.kill("agent-1")
    started = time.monotonic()
    with r.client() as client:
        pieces, finish, usage = _stream(client, max_tokens=32)
    assert len(pieces) == 32 and finish == "length" and usage.completion_tokens == 32
    assert time.monotonic() - started >= 3
    request = InferenceRequest.objects.get()
    assert request.state == RequestState.SERVED and request.node_id == second
    _books_balance(r)


def test_a_node_dead_mid_answer_ends_the_stream_with_an_error_and_bills_what_came(
    relay_stack, tmp_path
):
    r = relay_stack
    r.wait_polling(r.start_agent("agent-1", tmp_path))
    pieces: list[str] = []
    with r.client() as client:
        stream = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Go on."}], temperature=0,
            max_tokens=1800, stream=True,
        )  # fmt: skip
        with pytest.raises(openai.APIError, match="stopped answering"):
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if not pieces:
                        os.killpg(r.stack.procs["agent-1"].pid, signal.SIGKILL)
                    pieces.append(chunk.choices[0].delta.content)
    request = InferenceRequest.objects.get()
    assert request.state == RequestState.FAILED
    assert 0 < request.completion_tokens == len(pieces) < 1800
    assert request.prompt_tokens > 0 and request.charged_minor == _cost(request)
    _books_balance(r)


def test_a_client_that_leaves_stops_the_generation_and_pays_for_what_it_got(relay_stack, tmp_path):
    r = relay_stack
    r.wait_polling(r.start_agent("agent-1", tmp_path))
    with r.client() as client:
        stream = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Go on."}], temperature=0,
            max_tokens=1800, stream=True,
        )  # fmt: skip
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        stream.close()  # the client hangs up after its first token
        left = time.monotonic()
    request = r.stack.wait_until(
        "the request to close",
        lambda: InferenceRequest.objects.exclude(state=RequestState.REQUESTED).first(),
    )
    assert request.state == RequestState.FAILED and request.outcome == "the client disconnected"
    assert 0 < request.completion_tokens < 1800 and request.charged_minor == _cost(request)
    # The agent was told to stop on its next push, well within a second of the hang-up.
    log = r.stack.workdir / "agent-1.log"
    r.stack.wait_until(
        "the agent to stop generating",
        lambda: f"request {request.pk}: " in log.read_text() and "stopping" in log.read_text(),
        timeout=1,
    )
    assert time.monotonic() - left < 2
    _books_balance(r)


def test_a_model_that_fails_to_load_is_not_offered_to_that_node_again(relay_stack, tmp_path):
    r = relay_stack
    broken = r.stack.env["INFERENCE_MODELS_DIR"] + "/broken.gguf"
    Path(broken).write_bytes(b"GGUF" + os.urandom(4096))
    model_register(InferenceModel(name="broken", path="broken.gguf", quantization="F32",
                                  context_length=2048, ram_mb=64))  # fmt: skip
    price_tokens({"broken": (1_000_000, 1_000_000)})
    node = r.start_agent("agent-1", tmp_path)
    r.wait_polling(node)
    with r.client() as client:
        with pytest.raises(openai.APIStatusError) as failed:
            client.completions.create(model="broken", prompt="hi", max_tokens=4)
        assert failed.value.status_code == 503 and "cannot load" in str(failed.value)
        assert r.redis.hget(f"{relay.PREFIX}:unfit:{node}", "broken")
        # The node is no longer a candidate for it (so: no capacity), but still is for others.
        with pytest.raises(openai.RateLimitError):
            client.completions.create(model="broken", prompt="hi", max_tokens=4)
        assert client.completions.create(model="tiny", prompt="hi", max_tokens=4).usage
    assert [req.state for req in InferenceRequest.objects.order_by("id")] == [
        RequestState.FAILED, RequestState.SERVED,
    ]  # fmt: skip
    _books_balance(r)
