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

from agent.sandbox.base import MIB, RunRequest, RunResult, job_env
from agent.sandbox.common import SandboxBase
from agent.sandbox.process import run_process
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import Workspace

log = logging.getLogger(__name__)


class UnsandboxedRunner(SandboxBase):
    name = "none"
    refuse_gpus = "GPU jobs need the Docker sandbox"

    def _preflight(self, req: RunRequest) -> None:
        log.warning(
            "UNSANDBOXED: this job runs with no isolation, as uid %d with full access to this "
            "machine and its network (allow_unsandboxed is set)",
            os.getuid(),
        )

    def _execute(
        self,
        req: RunRequest,
        workspace: Workspace,
        sink: OutputSink,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> RunResult:
        work_dir = workspace.root / "work"
        work_dir.mkdir()
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
        return run_process(
            argv,
            env=env,
            cwd=str(work_dir),
            req=req,
            workspace=workspace,
            sink=sink,
            cancel=cancel,
            hold=hold,
            cgroup=None,
        )
