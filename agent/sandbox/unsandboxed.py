"""No isolation at all: the job runs as the agent's user, on the agent's machine.

Only with an explicit flag, and every job says so in the log. There are no /in, /out and /work
here: the job finds its directories in COMPUTEPOOL_IN, COMPUTEPOOL_OUT and COMPUTEPOOL_WORK
(which every sandbox sets, so a job that uses them runs anywhere).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading

from agent.sandbox.base import (
    MIB,
    OutputCallback,
    RunRequest,
    RunResult,
    SandboxRefused,
    job_env,
)
from agent.sandbox.images import ImagePolicy
from agent.sandbox.process import run_process
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import Workspace

log = logging.getLogger(__name__)


class UnsandboxedRunner:
    name = "none"

    def __init__(self, *, policy: ImagePolicy, node: str | None = None) -> None:
        self._policy = policy
        self._node = node

    def run(
        self,
        req: RunRequest,
        *,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        req.check()
        self._policy.check(req.image)
        if req.gpus != 0:
            raise SandboxRefused("GPU jobs need the Docker sandbox")
        log.warning(
            "UNSANDBOXED: this job runs with no isolation, as uid %d with full access to this "
            "machine and its network (allow_unsandboxed is set)",
            os.getuid(),
        )
        try:
            workspace = Workspace.create(req.inputs, node=self._node)
            work_dir = workspace.root / "work"
            work_dir.mkdir()
        except OSError as exc:
            return RunResult.infrastructure_error(f"could not prepare the job's files: {exc}")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            **job_env(
                req,
                in_dir=str(workspace.in_dir),
                out_dir=str(workspace.out_dir),
                work_dir=str(work_dir),
            ),
        }
        argv = list(req.command)
        # The address-space rlimit is the one limit that needs no privilege (where there is
        # prlimit, that is: Linux).
        if shutil.which("prlimit"):
            argv = ["prlimit", f"--as={req.memory_mb * MIB}", "--", *argv]
        try:
            return run_process(
                argv,
                env=env,
                cwd=str(work_dir),
                req=req,
                workspace=workspace,
                sink=OutputSink(on_output),
                cancel=cancel,
                cgroup=None,
            )
        except OSError as exc:
            return RunResult.infrastructure_error(
                f"could not start the job: {exc}", workspace=workspace.root
            )
        except BaseException:
            workspace.remove()
            raise
