"""Watching a running job until it exits, times out, is cancelled or outgrows its output cap,
and turning what happened into a RunResult. Shared by every kind of sandbox."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from agent.sandbox.base import RunRequest, RunResult
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import OutputRejected, Workspace

log = logging.getLogger(__name__)

POLL_S = 0.1
# Walking /out is cheap but not free; a few checks a second bound the overshoot well enough.
OUTPUT_CHECK_S = 0.5


class Stop(Enum):
    EXITED = "exited"
    TIMED_OUT = "timed out"
    CANCELLED = "cancelled"
    OUTPUT_LIMIT = "output limit"


@dataclass
class Supervision:
    stop: Stop
    detail: str | None = None


def supervise(
    exited: threading.Event,
    *,
    req: RunRequest,
    workspace: Workspace,
    cancel: threading.Event | None,
    hold: threading.Event | None = None,
    freeze: Callable[[bool], None] | None = None,
) -> Supervision:
    """Block until the job ends by itself or must be killed; says which.

    While `hold` is set the job is suspended through `freeze(True)` (and resumed with
    `freeze(False)`); time suspended does not count against its timeout. A job is always
    resumed before this returns, so that whoever kills it next finds it running (a paused
    container cannot be killed)."""
    suspension = _Suspension(hold, freeze)
    try:
        return _watch(exited, req, workspace, cancel, suspension)
    finally:
        suspension.resume()


class _Suspension:
    def __init__(self, hold: threading.Event | None, freeze: Callable[[bool], None] | None) -> None:
        self._hold = hold if freeze is not None else None
        self._freeze = freeze
        self.since: float | None = None

    def follow(self) -> float:
        """Suspend or resume as `hold` says; returns the seconds just spent suspended (when
        it resumed), for the deadline."""
        if self._hold is None or self._freeze is None:
            return 0.0
        if self._hold.is_set() and self.since is None:
            self._freeze(True)
            self.since = time.monotonic()
            log.info("job suspended")
        elif not self._hold.is_set() and self.since is not None:
            return self.resume()
        return 0.0

    def resume(self) -> float:
        if self.since is None or self._freeze is None:
            return 0.0
        held, self.since = time.monotonic() - self.since, None
        try:
            self._freeze(False)
            log.info("job resumed")
        except Exception as exc:  # it may have ended while suspended: nothing to resume
            log.debug("resuming the job failed: %s", exc)
        return held


def _watch(
    exited: threading.Event,
    req: RunRequest,
    workspace: Workspace,
    cancel: threading.Event | None,
    suspension: _Suspension,
) -> Supervision:
    deadline = time.monotonic() + req.timeout_s
    next_output_check = time.monotonic() + OUTPUT_CHECK_S
    while True:
        remaining = deadline - time.monotonic()
        # A suspended job has no deadline running: poll at the usual pace.
        wait = POLL_S if suspension.since is not None else max(0.0, min(POLL_S, remaining))
        if exited.wait(wait):
            return Supervision(Stop.EXITED)
        if cancel is not None and cancel.is_set():
            return Supervision(Stop.CANCELLED)
        deadline += suspension.follow()
        if suspension.since is not None:
            continue  # a suspended job neither times out nor writes
        if deadline - time.monotonic() <= 0:
            return Supervision(Stop.TIMED_OUT)
        if time.monotonic() >= next_output_check:
            next_output_check = time.monotonic() + OUTPUT_CHECK_S
            try:
                workspace.check_output_limit(req.max_output_mb)
            except OutputRejected as exc:
                return Supervision(Stop.OUTPUT_LIMIT, str(exc))
            except OSError:
                # A directory the job keeps private; collecting at the end reports it.
                pass


def build_result(
    supervision: Supervision,
    *,
    req: RunRequest,
    workspace: Workspace,
    sink: OutputSink,
    exit_code: int | None,
    oom_killed: bool,
    duration_s: float,
    started_at: float | None = None,
    error: str | None = None,
) -> RunResult:
    """Outputs are collected even after a timeout (partial results can matter to the submitter);
    an exit code is reported only when the job ended by itself."""
    outputs = []
    if supervision.stop is Stop.OUTPUT_LIMIT:
        error = error or supervision.detail
    else:
        try:
            outputs = workspace.collect(req.max_output_mb)
        except OutputRejected as exc:
            error = error or str(exc)
        except OSError as exc:
            error = error or f"could not read the job's outputs: {exc}"
    return RunResult(
        exit_code=exit_code if supervision.stop is Stop.EXITED else None,
        timed_out=supervision.stop is Stop.TIMED_OUT,
        oom_killed=oom_killed,
        cancelled=supervision.stop is Stop.CANCELLED,
        stdout_tail=sink.tail("stdout"),
        stderr_tail=sink.tail("stderr"),
        outputs=outputs,
        duration_s=duration_s,
        error=error,
        workspace=workspace.root,
        started_at=started_at,
    )
