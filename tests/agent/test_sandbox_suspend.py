"""Suspending a running job in place (the owner came back, `on_owner_return: suspend`), in each
kind of real isolation: it stops making progress, resumes where it was, and the time it spent
suspended does not count against its timeout."""

from __future__ import annotations

import threading
import time

from agent.sandbox import RunResult, Sandbox
from tests.agent.conftest import job
from tests.agent.test_daemon import wait_until

# Two seconds of work in twenty steps, one line each.
COUNT = "i=0; while [ $i -lt 20 ]; do echo $i; i=$((i+1)); sleep 0.1; done"


class Lines:
    def __init__(self) -> None:
        self.text = ""

    def __call__(self, stream: str, data: bytes) -> None:
        self.text += data.decode()

    @property
    def count(self) -> int:
        return self.text.count("\n")


def _start(sandbox: Sandbox, **kwargs: object) -> tuple[list[RunResult], threading.Thread]:
    results: list[RunResult] = []
    thread = threading.Thread(target=lambda: results.append(sandbox.run(**kwargs)))  # type: ignore[arg-type]
    thread.start()
    return results, thread


def test_a_held_job_stops_and_resumes_without_losing_its_time(sandbox: Sandbox) -> None:
    lines, hold = Lines(), threading.Event()
    results, thread = _start(
        sandbox, req=job(COUNT, timeout_s=6), on_output=lines, cancel=threading.Event(), hold=hold
    )
    assert wait_until(lambda: lines.count >= 3, timeout=20)

    hold.set()
    time.sleep(0.5)  # the supervisor's next poll suspends it
    held_at = lines.count
    # Held longer than the whole timeout: counted, it would time the job out whatever the rest
    # took; not counted, the running part (two seconds of work, and the sandbox's start) has
    # six seconds, room enough on a machine busy with other work.
    time.sleep(7.0)
    assert lines.count <= held_at + 1  # at most a line already on its way
    hold.clear()
    thread.join(30)

    (result,) = results
    # Over seven seconds from start to end, but only the running part counts: not timed out.
    assert not result.timed_out and result.exit_code == 0, result
    assert lines.count == 20
    result.cleanup()


def test_a_held_job_can_still_be_stopped(sandbox: Sandbox) -> None:
    lines, hold, cancel = Lines(), threading.Event(), threading.Event()
    results, thread = _start(
        sandbox, req=job(COUNT, timeout_s=30), on_output=lines, cancel=cancel, hold=hold
    )
    assert wait_until(lambda: lines.count >= 2, timeout=20)
    hold.set()
    time.sleep(0.5)

    cancel.set()
    thread.join(20)

    (result,) = results
    assert result.cancelled and lines.count < 20
    result.cleanup()
