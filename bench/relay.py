"""The inference relay's figures, on this machine, in one run.

1. Overhead: the same llama.cpp engine (the tiny model, in its sandboxed process) called
   directly from this process and through the relay, in alternating rounds (the official
   `openai` client → a uvicorn hub → Redis → a real agent → the engine, and back). Figures:
   time to the first token (p50, p99) and tokens/s after it, for each path; the relay's added
   TTFT.
2. Concurrent streams: a fake fast engine (an agent that streams a fixed text at a set rate,
   stamping each token with the time it was made) behind one hub; `--streams` clients open SSE
   streams together and hold them. Figure: the added latency of each token (arrival − stamp,
   one clock), p50/p99, and how many streams finished.

    .venv/bin/python -m bench.relay [--requests 40] [--tokens 1000] [--streams 500]
        [--rate 5] [--stream-tokens 100] [--ramp 10] [--hub-workers 2]
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import common

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "var" / "bench" / "models"
MESSAGES = [{"role": "user", "content": "Write about pooled compute."}]
ROUND = 5  # requests per path in each round of the overhead's alternation


# --- the fake fast engine and its agent (run as `python -m bench.relay fake-agent`) ------------


class FakeEngine:
    """An Engine that streams `tokens` stamped pieces at `rate` per second."""

    on_gpu = False

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def load(self, model_path: Path, *, context_length: int) -> None:
        pass

    def generate(self, request: dict[str, Any], emit) -> Any:
        from agent.engine.base import Answer

        count = 0
        for index in range(request["max_tokens"]):
            time.sleep(1 / self.rate)
            count += 1
            if not emit([f"{time.time():.6f};"], 8 if index == 0 else None):
                break
        return Answer("length", 8, count)

    def close(self) -> None:
        pass


def fake_agent(config_path: str, slots: int, rate: float) -> None:
    from agent.client import HubClient
    from agent.config import load_config
    from agent.inference import InferenceService, InferenceSettings
    from agent.model_cache import ModelCache

    config = load_config(Path(config_path))
    client = HubClient(config.hub_url, config.agent_key)
    service = InferenceService(
        client=client,
        cache=ModelCache(Path(config.models_dir), 2**30),
        engine_factory=lambda model: FakeEngine(rate),
        settings=InferenceSettings(slots=slots),
    )
    stop = threading.Event()
    # Each push's round trip, for the run's summary: a push that waits delays all its tokens.
    timings = open(Path(config_path).with_name("pushes.txt"), "w")  # noqa: SIM115
    push = client.inference_push

    def timed_push(pushes):
        started = time.monotonic()
        try:
            return push(pushes)
        finally:
            timings.write(f"{(time.monotonic() - started) * 1000:.2f}\n")
            timings.flush()

    client.inference_push = timed_push

    def beat() -> None:  # keeps the node online, as the daemon's heartbeat does
        while not stop.wait(2):
            client.heartbeat(status="available", load={}, gpus=[], leases=[])

    client.heartbeat(status="available", load={}, gpus=[], leases=[])
    threading.Thread(target=beat, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    service.run()


# --- setup ---------------------------------------------------------------------------------------


def setup(dbname: str) -> tuple[str, str]:
    """The catalog's tiny model, priced; a funded submitter; an operator key."""
    common.django_setup(dbname)
    from inference.catalog import model_register, token_prices_publish
    from inference.models import InferenceModel
    from inference.tiny_model import write_tiny_model
    from people.services import api_key_create, user_create

    MODELS.mkdir(parents=True, exist_ok=True)
    write_tiny_model(MODELS / "tiny.gguf")
    model_register(InferenceModel(name="tiny", path="tiny.gguf", quantization="F32",
                                  context_length=2048, ram_mb=64))  # fmt: skip
    token_prices_publish({"tiny": (1, 1)})
    _, sub_key = common.submitter()
    operator = user_create(username="relay-op", roles=["operator"])
    _, op_key = api_key_create(user=operator, role="operator", name="bench")
    common.close_django_connections()
    return sub_key, op_key


def register_agent(hub_url: str, op_key: str, name: str, workdir: Path) -> Path:
    config = workdir / f"{name}.json"
    config.unlink(missing_ok=True)  # a node of an earlier run, on its dropped database
    subprocess.run(
        [common.PYTHON, "-m", "agent", "--config", str(config), "register", "--hub", hub_url,
         "--token", op_key, "--name", name],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    data = json.loads(config.read_text())
    data.update(models_dir=str(workdir / f"{name}-models"), work_dir=str(workdir / "work"))
    config.write_text(json.dumps(data))
    return config


def wait_polling(dbname: str, seconds: float = 60) -> None:
    import redis

    client = redis.Redis.from_url(common.REDIS_URL)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(client.scan_iter("cp:inf:n:*")):
            return
        time.sleep(0.2)
    raise RuntimeError("no agent polled for inference work")


# --- 1. overhead -------------------------------------------------------------------------------


def direct(engine, requests: int, tokens: int) -> tuple[list[float], list[float]]:
    ttft, rates = [], []
    for _ in range(requests):
        marks: list[float] = []

        def mark(pieces: list[str], _prompt: int | None = None, marks=marks) -> bool:
            marks.append(time.perf_counter())
            return True

        start = time.perf_counter()
        engine.generate(
            {"kind": "chat", "messages": MESSAGES, "max_tokens": tokens, "temperature": 0,
             "top_p": 1, "stop": [], "seed": None},
            mark,
        )  # fmt: skip
        ttft.append((marks[0] - start) * 1000)
        rates.append((len(marks) - 1) / (marks[-1] - marks[0]))
    return ttft, rates


def relayed(client, requests: int, tokens: int) -> tuple[list[float], list[float]]:
    ttft, rates = [], []
    for _ in range(requests):
        marks: list[float] = []
        start = time.perf_counter()
        stream = client.chat.completions.create(
            model="tiny", messages=MESSAGES, max_tokens=tokens, temperature=0, stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                marks.append(time.perf_counter())
        ttft.append((marks[0] - start) * 1000)
        rates.append((len(marks) - 1) / (marks[-1] - marks[0]))
    return ttft, rates


def overhead(url: str, key: str, requests: int, tokens: int) -> tuple[list[float], ...]:
    """Direct and relayed requests in alternating rounds of ROUND, so that both paths see the
    same moments of a shared machine: run one after the other, a neighbour's burst during one
    of them alone moves their ratio."""
    import openai

    from agent.engine.llama import LlamaProcess

    engine = LlamaProcess()
    engine.load(MODELS / "tiny.gguf", context_length=2048)
    d_ttft, d_rate, r_ttft, r_rate = [], [], [], []
    try:
        with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0,
                           timeout=60) as client:  # fmt: skip
            relayed(client, 3, 20)  # the agent fetches and loads the model
            for done in range(0, requests, ROUND):
                count = min(ROUND, requests - done)
                ttft, rates = direct(engine, count, tokens)
                d_ttft, d_rate = d_ttft + ttft, d_rate + rates
                ttft, rates = relayed(client, count, tokens)
                r_ttft, r_rate = r_ttft + ttft, r_rate + rates
    finally:
        engine.close()
    return d_ttft, d_rate, r_ttft, r_rate


# --- 2. concurrent streams ---------------------------------------------------------------------


async def streams(
    url: str, key: str, count: int, tokens: int, ramp_s: float
) -> tuple[list[tuple[float, float]], int, int, int, tuple[float, float]]:
    import httpx2

    lags: list[tuple[float, float]] = []  # (arrival, added latency ms) of each token
    done = [0, 0]  # finished, failed
    held = [0.0, 0.0]  # when the last stream opened, when the first one ended
    open_now, peak = [0], [0]
    why: Counter[str] = Counter()
    loop_lag: list[float] = []
    limits = httpx2.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with httpx2.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(index: int) -> None:
            await asyncio.sleep(ramp_s * index / count)  # clients arrive over the ramp
            body = {"model": "tiny", "messages": MESSAGES, "max_tokens": tokens, "stream": True}
            headers = {"Authorization": f"Bearer {key}"}
            try:
                async with client.stream("POST", "/v1/chat/completions", json=body,
                                         headers=headers) as response:  # fmt: skip
                    if response.status_code != 200:
                        done[1] += 1
                        why[f"HTTP {response.status_code} {(await response.aread())[:120]!r}"] += 1
                        return
                    open_now[0] += 1
                    peak[0] = max(peak[0], open_now[0])
                    if open_now[0] == count:
                        held[0] = time.time()
                    async for line in response.aiter_lines():
                        now = time.time()
                        if not line.startswith("data: {"):
                            continue
                        chunk = json.loads(line[6:])
                        for choice in chunk.get("choices", []):
                            text = choice.get("delta", {}).get("content") or ""
                            lags.extend((now, (now - float(s)) * 1000)
                                        for s in text.split(";") if s)  # fmt: skip
                    if open_now[0] == count:
                        held[1] = time.time()
                    open_now[0] -= 1
                done[0] += 1
            except Exception as exc:  # a stream that broke counts as failed, with why
                done[1] += 1
                why[f"{type(exc).__name__}: {exc}"[:160]] += 1

        async def probe() -> None:  # how late this client's own loop wakes
            while not stopped:
                before = time.monotonic()
                await asyncio.sleep(0.01)
                loop_lag.append((time.monotonic() - before - 0.01) * 1000)

        stopped = False
        probing = asyncio.ensure_future(probe())
        await asyncio.gather(*(one(index) for index in range(count)))
        stopped = True
        await probing
        print(
            f"  client loop lag p50 {common.pct(loop_lag, 50):.1f} ms, "
            f"p99 {common.pct(loop_lag, 99):.1f} ms"
        )
    for reason, count in why.most_common():
        print(f"  failed ×{count}: {reason}")
    return lags, done[0], done[1], peak[0], (held[0], held[1])


# --- the run -------------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "fake-agent":
        fake_agent(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    # Long enough that tokens/s is the relay's sustained rate: the tiny model makes 200 tokens
    # in about 33 ms, where the few milliseconds of an answer's last push alone are a tenth.
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--rate", type=float, default=5.0, help="tokens/s of each fake stream")
    parser.add_argument("--stream-tokens", type=int, default=100)
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds to open the streams")
    # One uvicorn worker per core of this 2-core machine, as a hub is deployed (docs/inference.md).
    parser.add_argument("--hub-workers", type=int, default=2)
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-streams", action="store_true")
    args = parser.parse_args()
    common.banner("inference relay")
    dbname = common.create_db("relay")
    workdir = ROOT / "var" / "bench" / "relay"
    workdir.mkdir(parents=True, exist_ok=True)
    import redis

    redis.Redis.from_url(common.REDIS_URL).flushdb()
    sub_key, op_key = setup(dbname)
    # Short long-polls: the engine agent's last one ends, and its node's state expires, within
    # seconds of its stop, before the fake agent's phase (a long-poll outlives its client, and
    # would take one of the next phase's requests and time out on it).
    env = {"INFERENCE_MODELS_DIR": str(MODELS), "INFERENCE_QUEUE_WAIT_S": "60",
           "INFERENCE_STALL_S": "60", "INFERENCE_POLL_WAIT_S": "2",
           "LOG_LEVEL": "WARNING"}  # fmt: skip
    hub = common.Hub(dbname, workers=args.hub_workers, worker_class="uvicorn", env=env)
    agents: list[subprocess.Popen] = []
    agent_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        hub.start()
        url = f"http://127.0.0.1:{hub.port}"
        print(f"hub: {hub.describe()}")
        if not args.skip_overhead:
            config = register_agent(url, op_key, "engine", workdir)
            agents.append(subprocess.Popen(
                [common.PYTHON, "-m", "agent", "--config", str(config), "run", "--sandbox",
                 "bwrap"], cwd=ROOT, env=agent_env, stdout=subprocess.DEVNULL,
                stderr=open(workdir / "engine-agent.log", "w"),  # noqa: SIM115
            ))  # fmt: skip
            wait_polling(dbname)
            d_ttft, d_rate, r_ttft, r_rate = overhead(url, sub_key, args.requests, args.tokens)
            rows = [
                ["direct", f"{common.pct(d_ttft, 50):.1f}", f"{common.pct(d_ttft, 99):.1f}",
                 f"{common.pct(d_rate, 50):.0f}"],
                ["relay", f"{common.pct(r_ttft, 50):.1f}", f"{common.pct(r_ttft, 99):.1f}",
                 f"{common.pct(r_rate, 50):.0f}"],
            ]  # fmt: skip
            common.table(rows, ["path", "TTFT p50 ms", "TTFT p99 ms", "tokens/s p50"])
            added50 = common.pct(r_ttft, 50) - common.pct(d_ttft, 50)
            added99 = common.pct(r_ttft, 99) - common.pct(d_ttft, 99)
            ratio = common.pct(r_rate, 50) / common.pct(d_rate, 50)
            print(f"added TTFT: p50 {added50:.1f} ms, p99 {added99:.1f} ms; "
                  f"tokens/s relay/direct: {ratio:.2f}")  # fmt: skip
            for proc in agents:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
            agents.clear()
            states = redis.Redis.from_url(common.REDIS_URL)
            deadline = time.monotonic() + 30
            while any(states.scan_iter("cp:inf:n:*")) and time.monotonic() < deadline:
                time.sleep(0.2)
        if not args.skip_streams:
            config = register_agent(url, op_key, "fake", workdir)
            agents.append(subprocess.Popen(
                [common.PYTHON, "-m", "bench.relay", "fake-agent", str(config),
                 str(args.streams), str(args.rate)], cwd=ROOT, env=agent_env,
                stderr=open(workdir / "fake-agent.log", "w"),  # noqa: SIM115
            ))  # fmt: skip
            wait_polling(dbname)
            started = time.monotonic()
            stamped, finished, failed, peak, (all_open, first_end) = common.run(
                streams(url, sub_key, args.streams, args.stream_tokens, args.ramp)
            )
            took = time.monotonic() - started
            lags = [lag for _, lag in stamped]
            print(f"{args.streams} streams of {args.stream_tokens} tokens at {args.rate}/s, "
                  f"opened over {args.ramp:g} s: {peak} open at once; {finished} finished, "
                  f"{failed} failed in {took:.1f} s; added token latency "
                  f"p50 {common.pct(lags, 50):.1f} ms, p99 {common.pct(lags, 99):.1f} ms "
                  f"({len(lags)} tokens)")  # fmt: skip
            pushes = [float(line) for line in open(workdir / "pushes.txt")]  # noqa: SIM115
            print(
                f"  the agent's {len(pushes)} pushes: round trip p50 "
                f"{common.pct(pushes, 50):.1f} ms, p99 {common.pct(pushes, 99):.1f} ms"
            )
            # The same by phase: while every stream was open (no stream opening or closing, whose
            # admission and settlement share the hub's cores with the relaying), while they
            # opened, and while they closed.
            phases = [
                (f"while all {args.streams} were open ({first_end - all_open:.1f} s)",
                 [lag for at, lag in stamped if all_open <= at <= first_end]),
                ("while they opened", [lag for at, lag in stamped if at < all_open]),
                ("while they closed", [lag for at, lag in stamped if at > first_end]),
            ]  # fmt: skip
            for phase, part in phases:
                if part:
                    print(f"  {phase}: p50 {common.pct(part, 50):.1f} ms, "
                          f"p99 {common.pct(part, 99):.1f} ms ({len(part)} tokens)")  # fmt: skip
    finally:
        for proc in agents:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        hub.stop()
        common.drop_db(dbname)


if __name__ == "__main__":
    main()
