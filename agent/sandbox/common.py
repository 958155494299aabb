"""The steps of a run that every sandbox takes in the same order, whatever isolates the job.

Kept apart from base.py, which the workspace and output modules import themselves.
"""

from __future__ import annotations

import threading

from agent.sandbox.base import OutputCallback, RunRequest, RunResult, SandboxRefused
from agent.sandbox.images import ImagePolicy
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import Workspace


class SandboxBase:
    """`run` checks the request and its image, refuses what this isolation cannot give, lays
    out the job's files and hands them to `_execute`. An error of the isolation itself (one of
    `start_errors`) ends the run as an infrastructure error, whose workspace `cleanup()` removes;
    any other exception removes the job's files on its way out."""

    name: str
    # Why GPU jobs are refused here; None where this sandbox can give a job a GPU.
    refuse_gpus: str | None = None
    start_errors: tuple[type[BaseException], ...] = (OSError,)
    start_error = "could not start the job"

    def __init__(self, *, policy: ImagePolicy, node: str | None = None) -> None:
        self._policy = policy
        # The node whose work this is: its work dirs (and containers) carry it, so that a
        # restarted agent removes what a killed one left (agent.sandbox.leftovers).
        self._node = node

    def run(
        self,
        req: RunRequest,
        *,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
        hold: threading.Event | None = None,
    ) -> RunResult:
        """Run the job; while `hold` is set it is suspended (docs/operators.md, "The owner's
        rules")."""
        req.check()
        self._policy.check(req.image)
        if req.gpus != 0 and self.refuse_gpus is not None:
            raise SandboxRefused(self.refuse_gpus)
        refused = self._preflight(req)
        if refused is not None:
            return refused
        try:
            workspace = self._workspace(req)
        except OSError as exc:
            return RunResult.infrastructure_error(f"could not prepare the job's files: {exc}")
        try:
            return self._execute(req, workspace, OutputSink(on_output), cancel, hold)
        except self.start_errors as exc:
            return RunResult.infrastructure_error(
                f"{self.start_error}: {exc}", workspace=workspace.root
            )
        except BaseException:
            workspace.remove()
            raise

    def close(self) -> None:
        """Nothing is kept between jobs, unless a sandbox says otherwise."""

    def _workspace(self, req: RunRequest) -> Workspace:
        """The job's files, laid out on the host for its sandbox to mount."""
        return Workspace.create(req.inputs, node=self._node)

    def _preflight(self, req: RunRequest) -> RunResult | None:
        """What this sandbox checks before a file is written; a result ends the run there."""
        return None

    def _execute(
        self,
        req: RunRequest,
        workspace: Workspace,
        sink: OutputSink,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> RunResult:
        raise NotImplementedError
