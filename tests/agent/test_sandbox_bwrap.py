"""The bubblewrap sandbox's own duties (what all sandboxes share is in test_sandbox_isolation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.sandbox import SandboxRefused
from agent.sandbox.bwrap_sandbox import BwrapSandbox
from agent.sandbox.cgroups import CGROUP_ROOT, PARENT, cgroups_v1_usable
from tests.agent.conftest import TEST_POLICY, job


def _job_cgroups(controller: str) -> set[Path]:
    return set((CGROUP_ROOT / controller / PARENT).glob("job-*"))


def test_it_refuses_gpu_jobs(bwrap_sandbox: BwrapSandbox) -> None:
    with pytest.raises(SandboxRefused, match="GPU"):
        bwrap_sandbox.run(job("true", gpus=1))


def test_it_shows_the_job_little_of_the_host(bwrap_sandbox: BwrapSandbox) -> None:
    result = bwrap_sandbox.run(job("ls /"))

    names = set(result.stdout_tail.split())
    assert {"usr", "etc", "in", "out", "work"} <= names
    assert not names & {"root", "home", "var", "run", "tmp", "srv", "mnt"}
    result.cleanup()


def test_it_cannot_read_root_only_files(bwrap_sandbox: BwrapSandbox) -> None:
    # Run as root, bubblewrap would map the job's uid to root and let it read these.
    result = bwrap_sandbox.run(job("cat /etc/shadow >/dev/null && echo read-shadow; echo done"))

    assert result.stdout_tail == "done\n"
    result.cleanup()


def test_it_limits_a_job_by_a_cgroup_it_removes_afterwards(bwrap_sandbox: BwrapSandbox) -> None:
    if not cgroups_v1_usable():
        pytest.skip("making cgroups takes root and cgroup v1")
    # Per controller: an agent killed earlier may have left its own job cgroups behind.
    before = _job_cgroups("memory")
    before_cpu = _job_cgroups("cpu")
    seen: dict[str, str] = {}

    def on_output(stream: str, chunk: bytes) -> None:
        (memory,) = _job_cgroups("memory") - before
        (cpu,) = _job_cgroups("cpu") - before_cpu
        seen["memory"] = (memory / "memory.limit_in_bytes").read_text().strip()
        seen["cpu"] = (cpu / "cpu.cfs_quota_us").read_text().strip()
        seen["procs"] = (memory / "cgroup.procs").read_text()

    result = bwrap_sandbox.run(
        job("echo started; sleep 1", memory_mb=48, cpus=0.5), on_output=on_output
    )

    assert seen["memory"] == str(48 * 1024 * 1024)
    assert seen["cpu"] == "50000"
    assert seen["procs"].split(), "the job ran outside its cgroup"
    assert _job_cgroups("memory") == before
    result.cleanup()


@pytest.mark.usefixtures("bwrap_sandbox")
def test_without_a_cgroup_rlimits_still_bound_memory_and_processes() -> None:
    sandbox = BwrapSandbox(policy=TEST_POLICY, cgroups=False)

    memory = sandbox.run(job("head -c 300m /dev/zero | tail >/dev/null", memory_mb=64))
    forks = sandbox.run(job("i=0; while [ $i -lt 40 ]; do sleep 2 & i=$((i+1)); done", pids=16))

    assert memory.exit_code != 0 and not memory.oom_killed
    assert "memory" in memory.stderr_tail.lower()
    assert "fork" in forks.stderr_tail.lower()
    memory.cleanup()
    forks.cleanup()
