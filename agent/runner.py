"""Runs one claimed task in one slot: verify, sandbox, stream, upload, report."""

from __future__ import annotations

import base64
import binascii
import codecs
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.client import (
    Backoff,
    Claim,
    HubClient,
    HubError,
    HubUnavailable,
    StaleLease,
)
from agent.sandbox import RunRequest, RunResult, Sandbox, SandboxRefused
from agent.spec import SpecRejected, verify_spec

log = logging.getLogger(__name__)

# Found through $COMPUTEPOOL_IN, which every sandbox sets (/in in Docker and bubblewrap; a host
# directory when running without a sandbox), so one command works in all of them.
SCRIPT_COMMANDS = {
    "sh": ("script.sh", ["sh", "-c", 'exec sh "$COMPUTEPOOL_IN/script.sh"']),
    "python": ("script.py", ["sh", "-c", 'exec python3 "$COMPUTEPOOL_IN/script.py"']),
}
# A job reports progress by printing this on stdout, e.g. "CP_PROGRESS 40 encoding frames".
PROGRESS_LINE = re.compile(r"^CP_PROGRESS\s+(\d{1,3})(?:\s+(.*))?$")
MAX_PROGRESS_MESSAGE = 200


@dataclass
class Timings:
    """Where an attempt's time went on this machine (time.monotonic()), for the log line of
    its end: what a slow start is made of."""

    began: float  # the claim in hand
    asked: float = 0.0  # the sandbox asked to run the job (after the spec's checks, the start)
    returned: float = 0.0  # the sandbox's result in hand
    started: float | None = None  # the job's process started, where the sandbox says when
    duration: float = 0.0  # the job's process ran

    def line(self, reported: float) -> str:
        """`reported`: when the hub acknowledged the result."""

        def ms(seconds: float) -> str:
            return f"{1000 * seconds:.0f} ms"

        parts = [f"prepare {ms(self.asked - self.began)}"]
        if self.started is not None:
            ended = self.started + self.duration
            parts += [
                f"sandbox start {ms(self.started - self.asked)}",
                f"run {ms(self.duration)}",
                f"sandbox stop {ms(self.returned - ended)}",
            ]
        parts.append(f"report {ms(reported - self.returned)}")
        return ", ".join(parts)


class SpecError(ValueError):
    """A signed spec that still cannot be run as written (missing or malformed fields)."""


@dataclass
class Cancellation:
    """Why a running attempt is being stopped; `event` is what the sandbox watches."""

    event: threading.Event = field(default_factory=threading.Event)
    failure_class: str = "job"
    detail: str = "cancelled"
    # Why, in one word, where the hub records it ("thermal").
    reason: str | None = None
    # Give the attempt back unfailed (the owner wants the machine), rather than report a failure.
    hand_back: bool = False
    stale: bool = False

    def request(
        self, *, failure_class: str = "job", detail: str = "cancelled", reason: str | None = None
    ) -> None:
        if not self.event.is_set():
            self.failure_class = failure_class
            self.detail = detail
            self.reason = reason
        self.event.set()

    def request_hand_back(self, detail: str) -> None:
        if not self.event.is_set():
            self.hand_back = True
            self.detail = detail
        self.event.set()

    def request_stale(self) -> None:
        self.stale = True
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


@dataclass
class RunOutcome:
    attempt_id: int
    # "succeeded", "failed", "handed_back", "stale" (lease lost: nothing reported) or "unreported"
    result: str
    failure_class: str | None = None
    detail: str = ""
    next: Claim | None = None


def build_run_request(spec: dict[str, Any]) -> RunRequest:
    """Translate a verified task spec into what the sandbox runs."""
    kind = spec.get("kind")
    inputs = _decode_inputs(spec.get("inputs") or {})
    image = spec.get("image") or ""
    if kind == "container":
        command = spec.get("command")
        if not image:
            raise SpecError("container task without an image")
        if not isinstance(command, list) or not command:
            raise SpecError("container task without a command")
        argv = [str(part) for part in command]
    elif kind == "script":
        script = spec.get("script")
        interpreter = spec.get("interpreter") or "sh"
        if not isinstance(script, str) or not script:
            raise SpecError("script task without a script")
        if interpreter not in SCRIPT_COMMANDS:
            raise SpecError(f"unknown interpreter {interpreter!r}")
        file_name, argv = SCRIPT_COMMANDS[interpreter]
        if file_name in inputs:
            raise SpecError(f"input {file_name!r} collides with the script")
        inputs[file_name] = script.encode()
    else:
        raise SpecError(f"unknown task kind {kind!r}")

    env = {str(key): str(value) for key, value in (spec.get("env") or {}).items()}
    env.update(
        CP_TASK_ID=str(spec.get("task_id", "")),
        CP_JOB_ID=str(spec.get("job_id", "")),
        CP_SLICE_INDEX=str(spec.get("slice_index", 0)),
        CP_SLICE_COUNT=str(spec.get("slice_count", 1)),
    )
    resources = spec.get("resources") or {}
    try:
        timeout_s = float(spec["timeout_s"])
        request = RunRequest(
            image=str(image),
            command=argv,
            env=env,
            inputs=inputs,
            timeout_s=timeout_s,
            memory_mb=int(resources.get("ram_mb") or 512),
            cpus=float(resources.get("cpu_cores") or 1.0),
            work_mb=int(resources.get("disk_mb") or 256),
            gpus=int(resources.get("gpus") or 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"bad timeout or resources: {exc!r}") from exc
    if timeout_s <= 0:
        raise SpecError("timeout_s must be positive")
    return request


def _decode_inputs(raw: Any) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        raise SpecError("inputs must map file names to base64 content")
    inputs: dict[str, bytes] = {}
    for name, content in raw.items():
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise SpecError(f"bad input file name {name!r}")
        try:
            inputs[name] = base64.b64decode(content, validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise SpecError(f"input {name!r} is not valid base64") from exc
    return inputs


class LogStreamer:
    """Batches a run's output to the hub from its own thread.

    The sandbox calls `feed` from its reader threads; it must never block on the network, so
    chunks wait in a bounded buffer and are dropped (and counted) when the hub cannot keep up.
    """

    def __init__(
        self,
        *,
        client: HubClient,
        claim: Claim,
        on_stale: Callable[[], None],
        batch_bytes: int = 32 * 1024,
        flush_interval_s: float = 0.5,
        max_pending_bytes: int = 1024 * 1024,
    ) -> None:
        self._client = client
        self._claim = claim
        self._on_stale = on_stale
        self._batch_bytes = batch_bytes
        self._flush_interval_s = flush_interval_s
        self._max_pending_bytes = max_pending_bytes
        self._lock = threading.Lock()
        self._pending: list[tuple[str, str]] = []
        self._pending_bytes = 0
        self._decoders = {
            stream: codecs.getincrementaldecoder("utf-8")(errors="replace")
            for stream in ("stdout", "stderr")
        }
        self._stdout_partial = ""
        self._progress: tuple[int, str] | None = None
        self._sent_progress: tuple[int, str] | None = None
        self._seq = 0
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._warned = False
        self.dropped_bytes = 0
        self.stale = False
        self._thread = threading.Thread(
            target=self._loop, name=f"log-{claim.attempt_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def feed(self, stream: str, data: bytes) -> None:
        if stream not in self._decoders or self.stale:
            return
        with self._lock:
            if self._pending_bytes + len(data) > self._max_pending_bytes:
                self.dropped_bytes += len(data)
                return
            text = self._decoders[stream].decode(data)
            if text:
                self._pending.append((stream, text))
                self._pending_bytes += len(data)
            if stream == "stdout":
                self._scan_progress(text)
            full = self._pending_bytes >= self._batch_bytes
        if full:
            self._wake.set()

    def _scan_progress(self, text: str) -> None:
        lines = (self._stdout_partial + text).split("\n")
        self._stdout_partial = lines.pop()[-4096:]
        for line in lines:
            match = PROGRESS_LINE.match(line.strip())
            if match:
                percent = min(100, int(match.group(1)))
                self._progress = (percent, (match.group(2) or "")[:MAX_PROGRESS_MESSAGE])

    def close(self, timeout_s: float = 10.0) -> None:
        """Send what is left (bounded by `timeout_s`) and stop the thread."""
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self.stale:
            self._wake.wait(self._flush_interval_s)
            self._wake.clear()
            self._flush()
            if self._closing.is_set():
                self._flush()
                return

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
            progress = self._progress
        batches = _batches(pending, self._batch_bytes)
        for position, (stream, data) in enumerate(batches):
            if not self._send(lambda s=stream, d=data: self._post_log(s, d)):
                # One failure is enough: hammering an unreachable hub would delay the report.
                self.dropped_bytes += sum(len(d) for _, d in batches[position:])
                return
        if progress is not None and progress != self._sent_progress:
            self._sent_progress = progress
            self._send(lambda: self._post_progress(*progress))

    def _post_log(self, stream: str, data: str) -> None:
        self._client.log(
            self._claim.attempt_id,
            lease_token=self._claim.lease_token,
            stream=stream,
            seq=self._seq,
            data=data,
        )
        self._seq += 1

    def _post_progress(self, percent: int, message: str) -> None:
        self._client.progress(
            self._claim.attempt_id,
            lease_token=self._claim.lease_token,
            progress=percent,
            message=message,
        )

    def _send(self, call: Callable[[], None]) -> bool:
        try:
            call()
        except StaleLease:
            self.stale = True
            self._on_stale()
            return False
        except HubError as exc:
            # Logs are best effort: the tails go with complete/fail in any case.
            if not self._warned:
                self._warned = True
                log.warning(
                    "attempt %s: log upload failed (%s); dropping output",
                    self._claim.attempt_id,
                    exc,
                )
            return False
        return True


def _batches(chunks: list[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    """Merge consecutive chunks of one stream into posts of at most `limit` characters."""
    batches: list[tuple[str, str]] = []
    for stream, text in chunks:
        if batches and batches[-1][0] == stream and len(batches[-1][1]) + len(text) <= limit:
            batches[-1] = (stream, batches[-1][1] + text)
            continue
        for start in range(0, len(text), limit):
            batches.append((stream, text[start : start + limit]))
    return batches


class TaskRunner:
    """Runs one attempt at a time; a slot owns one runner."""

    def __init__(
        self,
        *,
        client: HubClient,
        sandbox: Sandbox,
        hub_public_key: str,
        report_deadline_s: float = 300.0,
        backoff_factory: Callable[[], Backoff] = Backoff,
        sleep: Callable[[float], None] = time.sleep,
        log_flush_interval_s: float = 0.5,
    ) -> None:
        self._client = client
        self._sandbox = sandbox
        self._hub_public_key = hub_public_key
        self._report_deadline_s = report_deadline_s
        self._backoff_factory = backoff_factory
        self._sleep = sleep
        self._log_flush_interval_s = log_flush_interval_s
        self._busy = threading.Lock()

    def run(
        self,
        claim: Claim,
        *,
        cancel: Cancellation,
        want_next: bool,
        hold: threading.Event | None = None,
    ) -> RunOutcome:
        """Run the attempt; while `hold` is set the sandbox keeps the job suspended."""
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("this slot is already running an attempt")
        try:
            return self._run(claim, cancel, want_next, hold)
        finally:
            self._busy.release()

    def decline(self, claim: Claim, detail: str) -> RunOutcome:
        """Hand a claim back unrun (the agent is draining) so that the hub requeues it at once."""
        return self._fail(claim, "infra", detail)

    def hand_back(self, claim: Claim, detail: str) -> RunOutcome:
        """Give the attempt back to the hub, which requeues its task at once without counting it
        as a failure of the task or of this node: the owner wants the machine."""
        return self._reported(
            claim,
            lambda: self._client.hand_back(
                claim.attempt_id, lease_token=claim.lease_token, reason=detail
            ),
            RunOutcome(claim.attempt_id, "handed_back", detail=detail),
            f"handed back ({detail})",
        )

    def _run(
        self,
        claim: Claim,
        cancel: Cancellation,
        want_next: bool,
        hold: threading.Event | None,
    ) -> RunOutcome:
        timings = Timings(began=time.monotonic())
        try:
            verify_spec(claim.spec, claim.signature, self._hub_public_key)
        except SpecRejected as exc:
            log.error(
                "attempt %s: refusing a spec whose signature fails (%s)", claim.attempt_id, exc
            )
            return self._fail(claim, "infra", "spec signature invalid")
        if claim.spec.get("attempt_id") != claim.attempt_id:
            return self._fail(claim, "infra", "signed spec belongs to another attempt")
        try:
            request = build_run_request(claim.spec)
        except SpecError as exc:
            return self._fail(claim, "infra", f"bad spec: {exc}")

        # Confirms the lease before any resources are spent and marks the attempt running.
        try:
            self._client.progress(
                claim.attempt_id, lease_token=claim.lease_token, progress=0, message="started"
            )
        except StaleLease:
            return self._stale(claim)
        except HubError as exc:
            log.warning("attempt %s: could not report the start (%s)", claim.attempt_id, exc)

        streamer = LogStreamer(
            client=self._client,
            claim=claim,
            on_stale=cancel.request_stale,
            flush_interval_s=self._log_flush_interval_s,
        )
        streamer.start()
        timings.asked = time.monotonic()
        try:
            result = self._sandbox.run(
                request, on_output=streamer.feed, cancel=cancel.event, hold=hold
            )
        except SandboxRefused as exc:
            return self._fail(claim, "infra", f"refused by the sandbox: {exc}")
        except Exception as exc:
            log.exception("attempt %s: the %s sandbox failed", claim.attempt_id, self._sandbox.name)
            return self._fail(claim, "infra", f"sandbox error: {exc}")
        finally:
            streamer.close()
        timings.returned = time.monotonic()
        timings.started, timings.duration = result.started_at, result.duration_s
        try:
            return self._report(claim, request, result, cancel, want_next, timings)
        finally:
            result.cleanup()

    def _report(
        self,
        claim: Claim,
        request: RunRequest,
        result: RunResult,
        cancel: Cancellation,
        want_next: bool,
        timings: Timings,
    ) -> RunOutcome:
        if cancel.stale:
            return self._stale(claim)
        tails = {"stdout_tail": result.stdout_tail, "stderr_tail": result.stderr_tail}
        if result.cancelled or (cancel.is_set() and result.exit_code != 0):
            if cancel.hand_back:
                return self.hand_back(claim, cancel.detail)
            return self._fail(
                claim,
                cancel.failure_class,
                cancel.detail,
                exit_code=result.exit_code,
                reason=cancel.reason,
                **tails,
            )
        if result.error:
            return self._fail(claim, "infra", f"sandbox error: {result.error}", **tails)
        if result.timed_out:
            detail = f"timed out after {request.timeout_s:g} s"
            return self._fail(claim, "timeout", detail, **tails)
        if result.oom_killed:
            detail = f"out of memory (limit {request.memory_mb} MB)"
            return self._fail(claim, "infra", detail, exit_code=result.exit_code, **tails)
        if result.exit_code != 0:
            detail = f"exit code {result.exit_code}"
            return self._fail(claim, "job", detail, exit_code=result.exit_code, **tails)
        return self._complete(claim, result, want_next, timings)

    def _complete(
        self, claim: Claim, result: RunResult, want_next: bool, timings: Timings
    ) -> RunOutcome:
        for output in result.outputs:
            abandoned = self._with_retries(
                claim,
                lambda o=output: self._client.upload_artifact(
                    claim.attempt_id,
                    lease_token=claim.lease_token,
                    name=o.name,
                    sha256=o.sha256,
                    path=o.path,
                ),
            )
            if abandoned:
                return abandoned
        artifacts = [{"name": o.name, "size": o.size, "sha256": o.sha256} for o in result.outputs]
        replies: list[Any] = []
        abandoned = self._with_retries(
            claim,
            lambda: replies.append(
                self._client.complete(
                    claim.attempt_id,
                    lease_token=claim.lease_token,
                    exit_code=0,
                    stdout_tail=result.stdout_tail,
                    stderr_tail=result.stderr_tail,
                    artifacts=artifacts,
                    reported_runtime_s=round(result.duration_s, 3),
                    want_next=want_next,
                )
            ),
        )
        if abandoned:
            return abandoned
        log.info(
            "attempt %s (task %s of job %s): succeeded in %.1f s, %d output(s); %s",
            claim.attempt_id,
            claim.spec.get("task_id"),
            claim.spec.get("job_id"),
            result.duration_s,
            len(result.outputs),
            timings.line(time.monotonic()),
        )
        return RunOutcome(claim.attempt_id, "succeeded", next=replies[0].next)

    def _fail(
        self,
        claim: Claim,
        failure_class: str,
        detail: str,
        *,
        exit_code: int | None = None,
        stdout_tail: str = "",
        stderr_tail: str = "",
        reason: str | None = None,
    ) -> RunOutcome:
        return self._reported(
            claim,
            lambda: self._client.fail(
                claim.attempt_id,
                lease_token=claim.lease_token,
                failure_class=failure_class,
                exit_code=exit_code,
                detail=detail,
                stdout_tail=stdout_tail,
                stderr_tail=stderr_tail,
                reason=reason,
            ),
            RunOutcome(claim.attempt_id, "failed", failure_class=failure_class, detail=detail),
            f"failed [{failure_class}] {detail}",
        )

    def _reported(
        self, claim: Claim, report: Callable[[], object], outcome: RunOutcome, said: str
    ) -> RunOutcome:
        """Send the attempt's last report (retried while the hub is unreachable) and log it."""
        abandoned = self._with_retries(claim, report)
        if abandoned:
            return abandoned
        log.info(
            "attempt %s (task %s of job %s): %s",
            claim.attempt_id,
            claim.spec.get("task_id"),
            claim.spec.get("job_id"),
            said,
        )
        return outcome

    def _stale(self, claim: Claim) -> RunOutcome:
        log.warning("attempt %s: the hub says the lease is stale; abandoning it", claim.attempt_id)
        return RunOutcome(claim.attempt_id, "stale")

    def _with_retries(self, claim: Claim, call: Callable[[], object]) -> RunOutcome | None:
        """Retry while the hub is unreachable: a finished result is worth waiting for.

        Returns None once the call went through, or the outcome that ends the attempt without it.
        """
        backoff = self._backoff_factory()
        deadline = time.monotonic() + self._report_deadline_s
        while True:
            try:
                call()
                return None
            except StaleLease:
                return self._stale(claim)
            except HubUnavailable as exc:
                delay = backoff.next_delay()
                if time.monotonic() + delay > deadline:
                    log.error("attempt %s: giving up reporting (%s)", claim.attempt_id, exc)
                    return RunOutcome(claim.attempt_id, "unreported", detail=str(exc))
                log.warning(
                    "attempt %s: hub unreachable (%s), retrying in %.1f s",
                    claim.attempt_id,
                    exc,
                    delay,
                )
                self._sleep(delay)
            except HubError as exc:
                log.error("attempt %s: the hub refused the report (%s)", claim.attempt_id, exc)
                return RunOutcome(claim.attempt_id, "unreported", detail=str(exc))
