"""The agent's main loop: a heartbeat thread, N claiming slots, and a graceful drain."""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import psutil

from agent.benchmarking import BenchmarkService
from agent.client import (
    AuthError,
    Backoff,
    Claim,
    HeartbeatReply,
    HubClient,
    HubError,
    HubUnavailable,
)
from agent.inference import InferenceService
from agent.owner import KEEP, OWNER, THERMAL, Observer, OwnerStatus, Verdict, may_take_work
from agent.runner import Cancellation, TaskRunner
from agent.spec import SpecRejected

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_AUTH = 3
# How long a due benchmark waits for running tasks to end before it measures anyway.
BENCHMARK_IDLE_WAIT_S = 600.0


@dataclass
class DaemonSettings:
    slots: int = 1
    claim_wait_s: int = 25
    heartbeat_interval_s: float = 15.0
    drain_grace_s: float = 60.0
    # After the grace period, how long cancelled tasks get to report their failure.
    cancel_grace_s: float = 15.0
    reconnect_base_s: float = 1.0
    reconnect_cap_s: float = 60.0
    idle_base_s: float = 1.0
    idle_cap_s: float = 30.0
    # How often the owner's rules are checked: how soon the owner's return is noticed.
    owner_tick_s: float = 2.0


@dataclass
class Slot:
    index: int
    runner: TaskRunner
    claim: Claim | None = None
    cancellation: Cancellation | None = None
    idle: threading.Event = field(default_factory=threading.Event)
    # Set while the owner's rules keep the running job suspended, and since when.
    hold: threading.Event = field(default_factory=threading.Event)
    held_since: float | None = None

    def __post_init__(self) -> None:
        self.idle.set()


def sample_load() -> dict[str, float]:
    return {
        "cpu_pct": psutil.cpu_percent(interval=None),
        "mem_pct": psutil.virtual_memory().percent,
    }


class Daemon:
    def __init__(
        self,
        *,
        client: HubClient,
        runner_factory: Callable[[], TaskRunner],
        settings: DaemonSettings,
        capabilities: dict[str, Any] | None = None,
        gpu_state: Callable[[], list[dict[str, Any]]] = list,
        load: Callable[[], dict[str, float]] = sample_load,
        rng: random.Random | None = None,
        inference: InferenceService | None = None,
        benchmark: BenchmarkService | None = None,
        owner: Observer | None = None,
    ) -> None:
        self._inference = inference
        # The owner's rules; without them the machine works whenever it runs. With them nothing
        # is claimed before their first check.
        self._owner = owner
        self._verdict = (
            Verdict(True, "no owner rules")
            if owner is None
            else Verdict(False, "checking the owner's rules")
        )
        if owner is not None and inference is not None:
            inference.draining = True  # until the first check says otherwise
        self._benchmark = benchmark
        # Set while a hardware benchmark waits for the slots or runs: no new work meanwhile.
        self._benchmarking = threading.Event()
        self._client = client
        self._settings = settings
        self._capabilities = capabilities
        self._gpu_state = gpu_state
        self._load = load
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not secrets
        self._slots = [Slot(index, runner_factory()) for index in range(settings.slots)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._force = threading.Event()
        self._connected = threading.Event()
        self._beat_now = threading.Event()
        self._heartbeat_stop = threading.Event()
        self._hub_drain = False
        self._hub_state = ""
        self._exit_code = EXIT_OK

    # -- control -------------------------------------------------------------------------------

    def request_stop(self, reason: str = "") -> None:
        if self._stop.is_set():
            return
        log.info("stopping%s: no new tasks will be claimed", f" ({reason})" if reason else "")
        self._stop.set()
        self._beat_now.set()
        if self._inference is not None:
            self._inference.draining = True

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._stop.is_set():
            log.warning("%s again: cancelling running tasks now", name)
            self._force.set()
        else:
            self.request_stop(name)

    def run(self) -> int:
        log.info("agent starting: %d slot(s), hub %s", self._settings.slots, self._client.base_url)
        if self._owner is not None:
            # Checked once before the first heartbeat, which tells the hub what they say.
            self._owner_check()
            threading.Thread(target=self._owner_loop, name="owner", daemon=True).start()
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        heartbeat.start()
        # Slot threads are daemons: one blocked in a long-poll claim must not hold up the exit.
        for slot in self._slots:
            threading.Thread(
                target=self._slot_loop, args=(slot,), name=f"slot-{slot.index}", daemon=True
            ).start()
        if self._inference is not None:
            threading.Thread(target=self._inference.run, name="inference", daemon=True).start()
        # A timed wait keeps the main thread responsive to signals.
        while not self._stop.wait(0.5):
            pass
        self._drain(heartbeat)
        return self._exit_code

    # -- heartbeats ----------------------------------------------------------------------------

    def status(self) -> str:
        # The owner's rules saying no is a drain as the hub sees it: it routes this node
        # nothing and counts it out of the market's supply until they say yes again.
        if self._stop.is_set() or self._hub_drain or not self._verdict.ok:
            return "draining"
        if all(not slot.idle.is_set() for slot in self._slots):
            return "busy"
        return "available"

    def _leases(self) -> list[str]:
        with self._lock:
            return [slot.claim.lease_token for slot in self._slots if slot.claim is not None]

    def _beat(
        self, *, capabilities: dict[str, Any] | None, status: str | None = None
    ) -> HeartbeatReply:
        try:
            gpus = self._gpu_state()
        except Exception as exc:
            log.debug("GPU sample failed: %s", exc)
            gpus = []
        status = status or self.status()
        if status == "available" and any(gpu.get("throttled") for gpu in gpus):
            status = "degraded"
        load: dict[str, Any] = dict(
            self._load(), running=self.running(), slots=self._settings.slots
        )
        if self._inference is not None:
            served = self._inference.state()
            load.update(
                models_loaded=served["models_loaded"], inference_running=served["current_load"]
            )
        return self._client.heartbeat(
            status=status, load=load, gpus=gpus, leases=self._leases(), capabilities=capabilities
        )

    def running(self) -> int:
        return sum(1 for slot in self._slots if not slot.idle.is_set())

    def _heartbeat_loop(self) -> None:
        backoff = self._reconnect_backoff()
        interval = self._settings.heartbeat_interval_s
        capabilities = self._capabilities
        while not self._heartbeat_stop.is_set():
            try:
                reply = self._beat(capabilities=capabilities)
            except HubUnavailable as exc:
                self._connected.clear()
                delay = backoff.next_delay()
                log.warning("hub unreachable (%s); retrying in %.1f s", exc, delay)
                self._sleep_heartbeat(delay)
                continue
            except AuthError as exc:
                log.error(
                    "the hub rejected this agent's key (%s); register this machine again", exc
                )
                self._exit_code = EXIT_AUTH
                self.request_stop("agent key rejected")
                return
            except HubError as exc:
                delay = backoff.next_delay()
                log.error("heartbeat refused (%s); retrying in %.1f s", exc, delay)
                self._sleep_heartbeat(delay)
                continue
            # Applied before slots may claim, so that a hub-requested drain is never missed.
            self._apply(reply.drain, reply.cancel, reply.state)
            if reply.benchmark:
                self._start_benchmark()
            if not self._connected.is_set():
                log.info("connected to hub %s (node state: %s)", self._client.base_url, reply.state)
                self._connected.set()
            backoff.reset()
            capabilities = None  # sent with the first answered beat only: they rarely change
            interval = reply.poll_interval_s or interval
            self._sleep_heartbeat(interval * (1 - 0.2 * self._rng.random()))

    def _sleep_heartbeat(self, seconds: float) -> None:
        self._beat_now.wait(seconds)
        self._beat_now.clear()

    def _apply(self, drain: bool, cancel: list[str], state: str) -> None:
        if drain != self._hub_drain:
            log.info("hub %s draining this node", "requests" if drain else "ends")
            self._hub_drain = drain
            if not drain:
                # Say "available" now rather than a heartbeat interval later: a node its
                # operator resumed is back online within a second.
                self._beat_now.set()
        if state and state != self._hub_state:
            if self._hub_state:
                log.info("node state on the hub: %s -> %s", self._hub_state, state)
            self._hub_state = state
        with self._lock:
            for slot in self._slots:
                if slot.claim is not None and slot.claim.lease_token in cancel:
                    assert slot.cancellation is not None
                    if not slot.cancellation.is_set():
                        log.info("hub cancelled attempt %s; stopping it", slot.claim.attempt_id)
                    slot.cancellation.request(failure_class="job", detail="cancelled")

    def _start_benchmark(self) -> None:
        if self._benchmark is None or self._benchmarking.is_set() or self._stop.is_set():
            return
        self._benchmarking.set()
        threading.Thread(target=self._run_benchmark, name="benchmark", daemon=True).start()

    def _run_benchmark(self) -> None:
        """Measure the machine, not the machine and a job: new claims wait, running tasks end
        first (up to BENCHMARK_IDLE_WAIT_S)."""
        assert self._benchmark is not None
        try:
            if not self._wait_idle(time.monotonic() + BENCHMARK_IDLE_WAIT_S):
                log.warning("benchmark: tasks still running; measuring anyway")
            self._benchmark.run_due()
        except (HubError, SpecRejected) as exc:
            log.error("benchmark: %s", exc)
        except Exception:
            log.exception("benchmark: unexpected error")
        finally:
            self._benchmarking.clear()

    def _reconnect_backoff(self) -> Backoff:
        return Backoff(
            base_s=self._settings.reconnect_base_s,
            cap_s=self._settings.reconnect_cap_s,
            rng=self._rng,
        )

    # -- the owner's rules -----------------------------------------------------------------------

    @property
    def verdict(self) -> Verdict:
        return self._verdict

    def _owner_loop(self) -> None:
        while not self._stop.wait(self._settings.owner_tick_s):
            self._owner_check()

    def _owner_check(self) -> None:
        try:
            self._owner_tick()
        except Exception:
            log.exception("checking the owner's rules failed; trying again")

    def _owner_tick(self) -> None:
        assert self._owner is not None
        verdict = may_take_work(self._owner.observe(), self._owner.rules)
        if _gist(verdict) != _gist(self._verdict):
            log.info("%s: %s", "taking work" if verdict.ok else "taking no work", verdict.reason)
        self._verdict = verdict
        if self._inference is not None and not self._stop.is_set():
            # Serving models is work for the pool too: no new requests while the rules say no.
            self._inference.draining = not verdict.ok
        self._follow(verdict)
        self._owner.state.write_status(
            OwnerStatus(
                ok=verdict.ok,
                reason=verdict.reason,
                idle_source=self._owner.idle.name,
                suspended=sum(1 for slot in self._slots if slot.held_since is not None),
                updated_at=time.time(),
                pid=os.getpid(),
            )
        )

    def _follow(self, verdict: Verdict) -> None:
        """Do with the running work what the verdict says."""
        assert self._owner is not None
        rules = self._owner.rules
        now = time.monotonic()
        with self._lock:
            for slot in self._slots:
                if slot.claim is None or slot.cancellation is None:
                    continue
                if verdict.ok or verdict.running == KEEP:
                    if slot.held_since is not None:
                        log.info("slot %d: resuming attempt %s", slot.index, slot.claim.attempt_id)
                    slot.hold.clear()
                    slot.held_since = None
                elif verdict.running == THERMAL:
                    if not slot.cancellation.is_set():
                        log.warning(
                            "slot %d: stopping attempt %s: %s",
                            slot.index,
                            slot.claim.attempt_id,
                            verdict.reason,
                        )
                    slot.cancellation.request(
                        failure_class="infra", detail=verdict.reason, reason="thermal"
                    )
                elif verdict.running == OWNER and rules.on_owner_return == "suspend":
                    if slot.held_since is None:
                        log.info(
                            "slot %d: suspending attempt %s", slot.index, slot.claim.attempt_id
                        )
                        slot.held_since = now
                        slot.hold.set()
                    elif now - slot.held_since >= rules.suspend_max_s:
                        slot.cancellation.request_hand_back(
                            f"suspended for {rules.suspend_max_s:g} s: {verdict.reason}"
                        )
                elif verdict.running == OWNER:
                    slot.cancellation.request_hand_back(verdict.reason)

    # -- slots ---------------------------------------------------------------------------------

    def _claiming(self) -> bool:
        return self._why_not_claiming() is None

    def _why_not_claiming(self) -> str | None:
        if self._stop.is_set() or self._hub_drain:
            return "agent draining"
        if self._benchmarking.is_set():
            return "agent benchmarking"
        if not self._verdict.ok:
            return self._verdict.reason
        return None

    def _slot_loop(self, slot: Slot) -> None:
        unreachable = self._reconnect_backoff()
        idle = Backoff(
            base_s=self._settings.idle_base_s, cap_s=self._settings.idle_cap_s, rng=self._rng
        )
        while not self._stop.is_set():
            if not self._connected.wait(1.0) or not self._claiming():
                self._stop.wait(1.0)
                continue
            started = time.monotonic()
            try:
                claim = self._client.claim(wait=self._settings.claim_wait_s)
            except HubError as exc:
                delay = unreachable.next_delay()
                level = logging.WARNING if isinstance(exc, HubUnavailable) else logging.ERROR
                log.log(
                    level, "slot %d: claim failed (%s); retrying in %.1f s", slot.index, exc, delay
                )
                self._stop.wait(delay)
                continue
            unreachable.reset()
            if claim is None:
                # A hub that held the long-poll has already paced us; only a quick 204 backs off.
                held = time.monotonic() - started >= 0.8 * self._settings.claim_wait_s
                pause = self._settings.idle_base_s * self._rng.random()
                self._stop.wait(pause if held else idle.next_delay())
                continue
            idle.reset()
            try:
                self._work(slot, claim)
            except Exception:
                log.exception("slot %d: unexpected error; the slot carries on", slot.index)
                self._stop.wait(unreachable.next_delay())

    def _work(self, slot: Slot, claim: Claim | None) -> None:
        """Run a claim and any follow-up the hub hands back with its completion."""
        while claim is not None:
            spec = claim.spec
            why = self._why_not_claiming()
            if why is not None:
                log.info("slot %d: handing back attempt %s (%s)", slot.index, claim.attempt_id, why)
                if not self._verdict.ok:  # the owner's rules: no fault of the task or the node
                    slot.runner.hand_back(claim, self._verdict.reason)
                else:
                    slot.runner.decline(claim, why)
                return
            log.info(
                "slot %d: claimed task %s of job %s (attempt %s)",
                slot.index,
                spec.get("task_id"),
                spec.get("job_id"),
                claim.attempt_id,
            )
            cancellation = Cancellation()
            with self._lock:
                slot.claim, slot.cancellation = claim, cancellation
                slot.idle.clear()
            try:
                outcome = slot.runner.run(
                    claim, cancel=cancellation, want_next=self._claiming(), hold=slot.hold
                )
            finally:
                with self._lock:
                    slot.claim, slot.cancellation = None, None
                    slot.hold.clear()
                    slot.held_since = None
                    slot.idle.set()
            claim = outcome.next

    # -- drain ---------------------------------------------------------------------------------

    def _drain(self, heartbeat: threading.Thread) -> None:
        with self._lock:
            for slot in self._slots:
                # Suspended, it would only sit out the grace period: the owner still wants the
                # machine, so it goes back to the hub now.
                if slot.held_since is not None and slot.cancellation is not None:
                    slot.cancellation.request_hand_back(f"agent stopping: {self._verdict.reason}")
        running = self.running()
        grace = self._settings.drain_grace_s
        log.info("draining: %d task(s) running, waiting up to %g s for them", running, grace)
        if running and not self._wait_idle(time.monotonic() + grace):
            with self._lock:
                for slot in self._slots:
                    if slot.claim is not None and slot.cancellation is not None:
                        log.warning(
                            "slot %d: grace period over, cancelling attempt %s",
                            slot.index,
                            slot.claim.attempt_id,
                        )
                        slot.cancellation.request(
                            failure_class="infra", detail="agent shutting down"
                        )
            self._force.clear()
            self._wait_idle(time.monotonic() + self._settings.cancel_grace_s)
        if self._inference is not None:
            self._inference.stop()
        self._heartbeat_stop.set()
        self._beat_now.set()
        heartbeat.join(timeout=5.0)
        if self._exit_code == EXIT_OK:
            try:
                self._beat(capabilities=None, status="draining")
                log.info("final heartbeat sent")
            except HubError as exc:
                log.warning("final heartbeat failed (%s)", exc)
        log.info("agent stopped")

    def _wait_idle(self, deadline: float) -> bool:
        """Wait for every slot to be idle; a second signal (`_force`) cuts the wait short."""
        for slot in self._slots:
            while not slot.idle.wait(0.2):
                if self._force.is_set() or time.monotonic() >= deadline:
                    return False
        return True


def _gist(verdict: Verdict) -> tuple[bool, str, str]:
    """A verdict without its figures: a change of rule is logged, a minute more idle is not."""
    return verdict.ok, verdict.running, re.sub(r"[0-9.]+", "#", verdict.reason)
