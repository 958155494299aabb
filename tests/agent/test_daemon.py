"""The daemon loop against a stub hub on 127.0.0.1, with a scripted sandbox."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.client import HubClient
from agent.daemon import EXIT_AUTH, Daemon, DaemonSettings
from agent.inference import InferenceService
from agent.owner import Observer
from agent.runner import TaskRunner
from agent.sandbox import Sandbox
from tests.agent.test_client import HubKeys, HubStub, Recorded, claim_payload, free_port, hub
from tests.agent.test_runner import FakeSandbox

__all__ = ["hub"]

REPO = Path(__file__).resolve().parents[2]
FAST = {
    "claim_wait_s": 0,
    "heartbeat_interval_s": 0.1,
    "drain_grace_s": 5.0,
    "cancel_grace_s": 2.0,
    "reconnect_base_s": 0.05,
    "reconnect_cap_s": 0.2,
    "idle_base_s": 0.02,
    "idle_cap_s": 0.1,
}


@pytest.fixture
def keys() -> HubKeys:
    return HubKeys()


def make_daemon(
    url: str,
    keys: HubKeys,
    sandbox: Sandbox | FakeSandbox,
    *,
    owner: Observer | None = None,
    gpu_state: Callable[[], list[dict[str, Any]]] = list,
    inference: InferenceService | None = None,
    **overrides: Any,
) -> Daemon:
    client = HubClient(url, "agent-key")
    return Daemon(
        client=client,
        runner_factory=lambda: TaskRunner(
            client=client,
            sandbox=sandbox,  # type: ignore[arg-type]
            hub_public_key=keys.public_b64,
            log_flush_interval_s=0.05,
        ),
        settings=DaemonSettings(**(FAST | overrides)),  # type: ignore[arg-type]
        capabilities={"gpus": [], "agent_version": "0.1.0"},
        gpu_state=gpu_state,
        load=lambda: {"cpu_pct": 1.0, "mem_pct": 2.0},
        rng=random.Random(7),
        owner=owner,
        inference=inference,
    )


class Running:
    """A daemon on a thread; `stop()` drains it and returns its exit code."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.codes: list[int] = []
        self.thread = threading.Thread(target=lambda: self.codes.append(daemon.run()))
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> int:
        self.daemon.request_stop("test")
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the daemon did not stop"
        return self.codes[0]


@pytest.fixture
def start() -> Iterator[Callable[[Daemon], Running]]:
    running: list[Running] = []

    def launch(daemon: Daemon) -> Running:
        running.append(Running(daemon))
        return running[-1]

    yield launch
    for each in running:
        if each.thread.is_alive():
            each.stop()


def heartbeats(hub: HubStub) -> list[dict[str, Any]]:
    return [r.json() for r in hub.received("/heartbeat")]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(autouse=True)
def fast_heartbeats(hub: HubStub) -> None:
    hub.heartbeat_reply["poll_interval_s"] = 0.1


def test_it_retries_a_hub_that_is_down_at_start_then_connects(
    keys: HubKeys, start: Callable[[Daemon], Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    port = free_port()
    stub = HubStub()
    stub.heartbeat_reply["poll_interval_s"] = 0.1
    stub.claims.append(claim_payload(keys))
    running = start(make_daemon(f"http://127.0.0.1:{port}", keys, FakeSandbox()))
    try:
        assert wait_until(lambda: caplog.text.count("hub unreachable") >= 3)
        assert running.thread.is_alive()

        stub.start(port)

        assert stub.wait_for(lambda: bool(stub.received("/complete")))
        assert "connected to hub" in caplog.text
        assert heartbeats(stub)[0]["capabilities"]["agent_version"] == "0.1.0"
        assert running.stop() == 0
    finally:
        stub.stop()


def test_it_keeps_beating_while_a_slot_runs_a_long_task(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox(hold_s=1.0)
    hub.claims.append(claim_payload(keys))
    running = start(make_daemon(hub.url, keys, sandbox))

    assert sandbox.running.wait(5)
    assert hub.wait_for(lambda: bool(hub.received("/complete")))

    during = [b for b in heartbeats(hub) if b["leases"] == ["lease-40"]]
    assert len(during) >= 5
    assert {b["status"] for b in during} == {"busy"}
    assert during[0]["load"] == {"cpu_pct": 1.0, "mem_pct": 2.0, "running": 1, "slots": 1}
    assert running.stop() == 0


def test_it_abandons_an_attempt_whose_lease_went_stale(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/40/log"] = (409, {"error": "stale_lease"})
    sandbox = FakeSandbox(chunks=[("stdout", b"working\n")], hold_s=10)
    hub.claims.append(claim_payload(keys))
    running = start(make_daemon(hub.url, keys, sandbox))

    assert sandbox.running.wait(5)
    claims_before = len(hub.received("/claim"))
    # The slot is free again (it claims) well before the 10 s task would have ended.
    assert hub.wait_for(lambda: len(hub.received("/claim")) > claims_before + 1)
    assert not sandbox.running.is_set()
    assert not hub.received("/fail") and not hub.received("/complete")
    assert len(hub.received("/log")) == 1  # never retried
    assert running.stop() == 0


def test_it_cancels_an_attempt_the_hub_lists_in_cancel(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox(hold_s=10)
    hub.claims.append(claim_payload(keys))
    running = start(make_daemon(hub.url, keys, sandbox))
    assert sandbox.running.wait(5)

    hub.heartbeat_reply["cancel"] = ["lease-40"]

    assert hub.wait_for(lambda: bool(hub.received("/fail")))
    body = hub.received("/fail")[0].json()
    assert (body["failure_class"], body["detail"]) == ("job", "cancelled")
    assert running.stop() == 0


def test_it_runs_the_next_task_handed_back_by_complete(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox()
    hub.claims.append(claim_payload(keys, attempt_id=40))
    hub.routes["POST", "/api/v1/agent/attempts/40/complete"] = (
        200,
        {"status": "succeeded", "next": claim_payload(keys, attempt_id=41)},
    )
    running = start(make_daemon(hub.url, keys, sandbox))

    assert hub.wait_for(lambda: bool(hub.received("/attempts/41/complete")))
    assert hub.received("/attempts/40/complete")[0].json()["want_next"] is True
    assert len(sandbox.requests) == 2
    assert running.stop() == 0


def test_it_drains_by_letting_a_running_task_finish(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox(hold_s=0.5)
    hub.claims.append(claim_payload(keys))
    running = start(make_daemon(hub.url, keys, sandbox))
    assert sandbox.running.wait(5)

    assert running.stop() == 0

    assert len(hub.received("/complete")) == 1
    paths = [r.path for r in hub.requests]
    last_complete = max(i for i, p in enumerate(paths) if p.endswith("/complete"))
    final = hub.requests[-1]
    assert final.path.endswith("/heartbeat")
    assert len(paths) - 1 > last_complete
    assert (final.json()["status"], final.json()["leases"]) == ("draining", [])
    assert any(b["status"] == "draining" and b["leases"] for b in heartbeats(hub))


def test_it_cancels_tasks_that_outlive_the_grace_period(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox(hold_s=10)
    hub.claims.append(claim_payload(keys))
    running = start(make_daemon(hub.url, keys, sandbox, drain_grace_s=0.3))
    assert sandbox.running.wait(5)
    stopping = time.monotonic()

    assert running.stop() == 0

    assert time.monotonic() - stopping < 3
    body = hub.received("/fail")[0].json()
    assert (body["failure_class"], body["detail"]) == ("infra", "agent shutting down")
    assert heartbeats(hub)[-1]["status"] == "draining"


def test_it_hands_back_a_claim_that_lands_during_the_drain(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    sandbox = FakeSandbox()
    daemon = make_daemon(hub.url, keys, sandbox)

    def claim_then_stop(_: Recorded) -> tuple[int, Any]:
        daemon.request_stop("test")
        return 200, claim_payload(keys)

    hub.routes["POST", "/api/v1/agent/claim"] = claim_then_stop
    running = start(daemon)

    assert hub.wait_for(lambda: bool(hub.received("/fail")))
    assert hub.received("/fail")[0].json()["detail"] == "agent draining"
    assert sandbox.requests == []
    assert running.stop() == 0


def test_it_stops_claiming_while_the_hub_drains_the_node(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running]
) -> None:
    hub.heartbeat_reply["drain"] = True
    running = start(make_daemon(hub.url, keys, FakeSandbox()))

    assert hub.wait_for(lambda: len(hub.received("/heartbeat")) >= 4)
    assert hub.received("/claim") == []
    assert heartbeats(hub)[-1]["status"] == "draining"
    assert running.stop() == 0


def test_it_exits_with_a_distinct_code_when_the_key_is_rejected(
    hub: HubStub, keys: HubKeys, caplog: pytest.LogCaptureFixture
) -> None:
    hub.routes["POST", "/api/v1/agent/heartbeat"] = (401, {"error": "not_authenticated"})
    daemon = make_daemon(hub.url, keys, FakeSandbox())
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(daemon.run()))
    thread.start()
    thread.join(10)

    assert result == [EXIT_AUTH]
    assert "register this machine again" in caplog.text


AGENT_PROCESS = textwrap.dedent(
    """
    import logging, random, sys
    from agent.client import HubClient
    from agent.daemon import Daemon, DaemonSettings
    from agent.runner import TaskRunner
    from tests.agent.test_runner import FakeSandbox

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    url, public_key = sys.argv[1], sys.argv[2]
    client = HubClient(url, "agent-key")
    sandbox = FakeSandbox(hold_s=1.0)
    daemon = Daemon(
        client=client,
        runner_factory=lambda: TaskRunner(
            client=client, sandbox=sandbox, hub_public_key=public_key, log_flush_interval_s=0.05
        ),
        settings=DaemonSettings(
            claim_wait_s=0, heartbeat_interval_s=0.2, drain_grace_s=10,
            idle_base_s=0.02, idle_cap_s=0.1,
        ),
        rng=random.Random(1),
    )
    daemon.install_signal_handlers()
    sys.exit(daemon.run())
    """
)


def test_it_drains_on_sigterm_and_exits_zero_after_a_final_draining_heartbeat(
    hub: HubStub, keys: HubKeys
) -> None:
    hub.claims.append(claim_payload(keys))
    process = subprocess.Popen(
        [sys.executable, "-c", AGENT_PROCESS, hub.url, keys.public_b64],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert hub.wait_for(lambda: bool(hub.received("/progress")), timeout=15)

        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)

    assert process.returncode == 0, stderr
    assert "stopping (SIGTERM)" in stderr
    assert len(hub.received("/complete")) == 1
    final = hub.requests[-1]
    assert final.path.endswith("/heartbeat")
    assert final.json()["status"] == "draining"
    assert "final heartbeat sent" in stderr
