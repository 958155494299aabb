"""Watching a running job until it exits, times out, is cancelled or outgrows its output cap,
and turning what happened into a RunResult. Shared by every kind of sandbox."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import Enum

from agent.sandbox.base import RunRequest, RunResult
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import OutputRejected, Workspace

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
) -> Supervision:
    """Block until the job ends by itself or must be killed; says which."""
    deadline = time.monotonic() + req.timeout_s
    next_output_check = time.monotonic() + OUTPUT_CHECK_S
    while True:
        remaining = deadline - time.monotonic()
        if exited.wait(max(0.0, min(POLL_S, remaining))):
            return Supervision(Stop.EXITED)
        if cancel is not None and cancel.is_set():
            return Supervision(Stop.CANCELLED)
        if remaining <= 0:
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
    )
