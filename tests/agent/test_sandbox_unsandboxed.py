"""No sandbox: only on request, loud at every job, and still timed, capped and cleaned up."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import pytest

from agent.sandbox import RunRequest, SandboxRefused
from agent.sandbox.images import ImagePolicy
from agent.sandbox.unsandboxed import UnsandboxedRunner


@pytest.fixture
def runner() -> UnsandboxedRunner:
    return UnsandboxedRunner(policy=ImagePolicy(("computepool/*",)))


def shell(script: str, **fields: object) -> RunRequest:
    fields.setdefault("timeout_s", 20)
    fields.setdefault("env", {})
    fields.setdefault("inputs", {})
    return RunRequest(image="computepool/busybox:1", command=["sh", "-c", script], **fields)


def test_it_warns_loudly_at_every_job(
    runner: UnsandboxedRunner, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.sandbox"):
        for _ in range(2):
            runner.run(shell("true")).cleanup()

    warnings = [r for r in caplog.records if "UNSANDBOXED" in r.getMessage()]
    assert len(warnings) == 2


def test_it_hands_the_job_its_directories_in_the_environment(runner: UnsandboxedRunner) -> None:
    blob = os.urandom(10_000)
    script = 'cp "$COMPUTEPOOL_IN/data.bin" "$COMPUTEPOOL_OUT/copy.bin" && pwd'

    result = runner.run(shell(script, inputs={"data.bin": blob}))

    assert result.exit_code == 0
    (output,) = result.outputs
    assert output.sha256 == hashlib.sha256(blob).hexdigest()
    assert result.stdout_tail.strip() == str(result.workspace / "work")
    result.cleanup()


def test_it_kills_the_whole_process_group_at_the_timeout(runner: UnsandboxedRunner) -> None:
    result = runner.run(shell("sleep 60 & echo $!; wait", timeout_s=1))

    assert result.timed_out and result.exit_code is None
    child = int(result.stdout_tail.split()[0])
    time.sleep(0.2)
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "zombie" in status.read_text()
    result.cleanup()


def test_it_still_checks_the_allow_list(runner: UnsandboxedRunner) -> None:
    req = RunRequest(image="evil/miner:1", command=["true"], env={}, inputs={}, timeout_s=5)

    with pytest.raises(SandboxRefused):
        runner.run(req)
