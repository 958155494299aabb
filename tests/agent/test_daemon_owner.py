"""The owner's rules in the run loop, against the stub hub: no claims while the owner is at the
machine, a "game" (a real process of the watched name) handing running work back, suspending
in place, the pause flag, and the thermal limits."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.client import HubClient
from agent.daemon import Daemon
from agent.inference import InferenceService, InferenceSettings
from agent.model_cache import ModelCache
from agent.owner import Observer, OwnerRules, StateDir
from agent.sandbox import Sandbox
from agent.sandbox.images import ImagePolicy
from agent.sandbox.unsandboxed import UnsandboxedRunner
from tests.agent.test_client import HubKeys, HubStub, claim_payload, hub
from tests.agent.test_daemon import Running, heartbeats, make_daemon, start, wait_until
from tests.agent.test_runner import FakeSandbox

__all__ = ["hub", "start"]

GAME = "cp-test-game"


class FakeIdle:
    """The input-idle source: this machine has no keyboard for a test to leave alone."""

    name = "fake input"

    def __init__(self, idle_s: float | None) -> None:
        self.value = idle_s

    def idle_s(self) -> float | None:
        return self.value


class Gpu:
    def __init__(self, temperature_c: float) -> None:
        self.temperature_c = temperature_c

    def __call__(self) -> list[dict[str, Any]]:
        return [{"index": 0, "temperature_c": self.temperature_c, "throttled": False}]


@pytest.fixture
def keys() -> HubKeys:
    return HubKeys()


@pytest.fixture(autouse=True)
def fast_heartbeats(hub: HubStub) -> None:
    hub.heartbeat_reply["poll_interval_s"] = 0.1


@pytest.fixture
def game(tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Starts a real process named like a game the owner plays."""
    started: list[subprocess.Popen[bytes]] = []
    binary = tmp_path / GAME
    binary.symlink_to("/bin/sleep")

    def launch() -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen([str(binary), "60"]))
        return started[-1]

    yield launch
    for proc in started:
        proc.kill()
        proc.wait(5)


def owner_daemon(
    hub: HubStub,
    keys: HubKeys,
    sandbox: Sandbox | FakeSandbox,
    state: StateDir,
    *,
    idle: FakeIdle | None = None,
    gpu: Gpu | None = None,
    inference: InferenceService | None = None,
    **rules: Any,
) -> Daemon:
    gpu = gpu or Gpu(50)
    observer = Observer(
        rules=OwnerRules(**rules),
        idle=idle or FakeIdle(3600.0),
        state=state,
        gpu_state=gpu,
        battery=lambda: False,
    )
    return make_daemon(
        hub.url, keys, sandbox, owner=observer, gpu_state=gpu, inference=inference, owner_tick_s=0.1
    )


def test_it_claims_nothing_until_the_machine_has_been_idle_long_enough(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    idle = FakeIdle(30.0)
    hub.claims.append(claim_payload(keys))
    daemon = owner_daemon(hub, keys, FakeSandbox(), StateDir(tmp_path), idle=idle, idle_minutes=2)
    running = start(daemon)

    assert hub.wait_for(lambda: len(heartbeats(hub)) >= 5)
    assert not hub.received("/claim")
    assert "in use: idle 0.5 min of 2 min (fake input)" in daemon.verdict.reason
    # The hub hears it as a drain from the first heartbeat on: it routes the node nothing.
    assert {beat["status"] for beat in heartbeats(hub)} == {"draining"}
    status = StateDir(tmp_path).read_status()
    assert status is not None and not status.ok and status.idle_source == "fake input"

    idle.value = 121.0

    assert hub.wait_for(lambda: bool(hub.received("/complete")))
    assert "available" in {beat["status"] for beat in heartbeats(hub)}
    assert running.stop() == 0


def test_a_game_starting_hands_the_running_task_back_and_stops_claims(
    hub: HubStub,
    keys: HubKeys,
    start: Callable[[Daemon], Running],
    tmp_path: Path,
    game: Callable[[], subprocess.Popen[bytes]],
) -> None:
    sandbox = FakeSandbox(hold_s=30)
    hub.claims.append(claim_payload(keys))
    daemon = owner_daemon(hub, keys, sandbox, StateDir(tmp_path), pause_programs=(GAME,))
    running = start(daemon)
    assert sandbox.running.wait(5)

    played = game()

    assert hub.wait_for(lambda: bool(hub.received("/hand-back")))
    body = hub.received("/attempts/40/hand-back")[0].json()
    assert body == {"lease_token": "lease-40", "reason": f"{GAME} running"}
    assert not hub.received("/fail") and not hub.received("/complete")
    claims = len(hub.received("/claim"))
    assert hub.wait_for(lambda: len(heartbeats(hub)) >= 10)
    assert len(hub.received("/claim")) == claims  # none while the game runs

    played.kill()
    played.wait(5)

    assert hub.wait_for(lambda: len(hub.received("/claim")) > claims)
    assert running.stop() == 0


def test_a_claim_that_lands_as_the_owner_returns_is_handed_back_unrun(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    sandbox = FakeSandbox()
    state = StateDir(tmp_path)
    daemon = owner_daemon(hub, keys, sandbox, state)

    def claim_then_pause(_: object) -> tuple[int, Any]:
        state.pause()
        time.sleep(0.5)  # the daemon's next tick sees the flag
        return 200, claim_payload(keys)

    hub.routes["POST", "/api/v1/agent/claim"] = claim_then_pause
    running = start(daemon)

    assert hub.wait_for(lambda: bool(hub.received("/hand-back")))
    assert "paused by the owner" in hub.received("/hand-back")[0].json()["reason"]
    assert sandbox.requests == []
    assert running.stop() == 0


def test_pause_and_resume_are_obeyed_within_a_tick(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    state = StateDir(tmp_path)
    state.pause()
    hub.claims.append(claim_payload(keys))
    daemon = owner_daemon(hub, keys, FakeSandbox(), state)
    running = start(daemon)

    assert hub.wait_for(lambda: len(heartbeats(hub)) >= 5)
    assert not hub.received("/claim")
    assert daemon.verdict.reason.startswith("paused by the owner")

    state.resume()

    assert hub.wait_for(lambda: bool(hub.received("/complete")))
    assert running.stop() == 0


def test_suspending_stops_the_job_process_in_place_and_resumes_it(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    state = StateDir(tmp_path)
    marker = tmp_path / "job-pid"
    # The job writes its pid, then works for about two seconds.
    script = f"echo $$ > {marker}; i=0; while [ $i -lt 20 ]; do i=$((i+1)); sleep 0.1; done"
    hub.claims.append(claim_payload(keys, kind="script", script=script, interpreter="sh"))
    sandbox = UnsandboxedRunner(policy=ImagePolicy(("computepool/*",)))
    daemon = owner_daemon(hub, keys, sandbox, state, on_owner_return="suspend")
    running = start(daemon)
    assert wait_until(marker.exists, timeout=10) and wait_until(lambda: bool(marker.read_text()))
    job = psutil.Process(int(marker.read_text()))

    state.pause()

    assert wait_until(lambda: job.status() == psutil.STATUS_STOPPED)
    time.sleep(2.5)  # longer than the job's own work: it would have ended had it run
    assert job.is_running() and job.status() == psutil.STATUS_STOPPED
    assert not hub.received("/complete") and not hub.received("/hand-back")
    assert StateDir(tmp_path).read_status().suspended == 1  # type: ignore[union-attr]

    state.resume()

    assert hub.wait_for(lambda: bool(hub.received("/complete")), timeout=10)
    assert not hub.received("/fail")
    assert running.stop() == 0


def test_a_task_suspended_too_long_is_handed_back(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    state = StateDir(tmp_path)
    sandbox = FakeSandbox(hold_s=30)
    hub.claims.append(claim_payload(keys))
    daemon = owner_daemon(hub, keys, sandbox, state, on_owner_return="suspend", suspend_max_s=0.5)
    running = start(daemon)
    assert sandbox.running.wait(5)

    state.pause()

    assert hub.wait_for(lambda: bool(hub.received("/hand-back")))
    reason = hub.received("/hand-back")[0].json()["reason"]
    assert reason.startswith("suspended for 0.5 s: paused by the owner")
    assert running.stop() == 0


def test_a_hot_gpu_takes_no_new_work_but_lets_the_running_task_finish(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    gpu = Gpu(50)
    sandbox = FakeSandbox(hold_s=1.0)
    hub.claims.append(claim_payload(keys, attempt_id=40))
    hub.claims.append(claim_payload(keys, attempt_id=41))
    daemon = owner_daemon(hub, keys, sandbox, StateDir(tmp_path), gpu=gpu, max_temp_c=80)
    running = start(daemon)
    assert sandbox.running.wait(5)

    gpu.temperature_c = 88

    assert hub.wait_for(lambda: bool(hub.received("/attempts/40/complete")))
    assert hub.wait_for(lambda: len(heartbeats(hub)) >= 15)
    assert not hub.received("/attempts/41/")  # the second is never claimed while it is hot
    assert "88 °C" in daemon.verdict.reason

    gpu.temperature_c = 70

    assert hub.wait_for(lambda: bool(hub.received("/attempts/41/complete")))
    assert running.stop() == 0


def test_a_critical_gpu_stops_the_task_and_reports_a_thermal_infra_failure(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    gpu = Gpu(50)
    sandbox = FakeSandbox(hold_s=30)
    hub.claims.append(claim_payload(keys))
    daemon = owner_daemon(hub, keys, sandbox, StateDir(tmp_path), gpu=gpu)
    running = start(daemon)
    assert sandbox.running.wait(5)

    gpu.temperature_c = 97

    assert hub.wait_for(lambda: bool(hub.received("/fail")))
    body = hub.received("/attempts/40/fail")[0].json()
    assert (body["failure_class"], body["reason"]) == ("infra", "thermal")
    assert body["detail"] == "GPU at 97 °C, at or above the critical 95 °C"
    assert not hub.received("/hand-back")
    assert running.stop() == 0


def test_no_inference_requests_are_taken_while_the_rules_say_no(
    hub: HubStub, keys: HubKeys, start: Callable[[Daemon], Running], tmp_path: Path
) -> None:
    def long_poll(_: object) -> tuple[int, Any]:
        time.sleep(0.2)  # the hub holds a poll it has nothing for
        return 204, None

    hub.routes["POST", "/api/v1/agent/inference/poll"] = long_poll
    serving = InferenceService(
        client=HubClient(hub.url, "agent-key"),
        cache=ModelCache(tmp_path / "models", 2**20),
        engine_factory=lambda model: pytest.fail("no request may reach the engine"),
        settings=InferenceSettings(poll_wait_s=1, retry_s=0.5),
    )
    state = StateDir(tmp_path / "state")
    state.pause()
    running = start(owner_daemon(hub, keys, FakeSandbox(), state, inference=serving))
    time.sleep(2.0)

    polls = [r.json() for r in hub.received("/inference/poll")]
    assert polls and {poll["status"] for poll in polls} == {"draining"}
    assert len(polls) <= 8  # spaced by retry_s, not a poll the moment the last came back

    state.resume()

    assert hub.wait_for(lambda: hub.received("/inference/poll")[-1].json()["status"] == "available")
    assert running.stop() == 0
