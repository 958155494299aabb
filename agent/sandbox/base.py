"""What every sandbox takes and gives back, whichever isolation runs the job."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

# In every sandbox a job starts in WORK_DIR, reads INPUT_DIR and leaves results in OUTPUT_DIR.
WORK_DIR = "/work"
INPUT_DIR = "/in"
OUTPUT_DIR = "/out"
SANDBOX_UID = 65534
SANDBOX_GID = 65534
MIB = 1024 * 1024

OutputCallback = Callable[[str, bytes], None]


class SandboxError(Exception):
    """A sandbox could not do what was asked."""


class SandboxRefused(SandboxError):
    """The request breaks this agent's policy (image not allowed, bad input name); nothing ran."""


class SandboxUnavailable(SandboxError):
    """No isolation of the kind asked for can run on this machine."""


@dataclass
class RunRequest:
    image: str
    command: list[str]
    env: dict[str, str]
    inputs: dict[str, bytes]
    timeout_s: float
    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 256
    work_mb: int = 256
    gpus: int = 0
    max_output_mb: int = 64

    def check(self) -> None:
        """Refuse limits that no sandbox could honour, before anything is set up."""
        problems = []
        if not self.command or not all(isinstance(part, str) for part in self.command):
            problems.append("command must be a non-empty list of strings")
        if not self.timeout_s > 0:
            problems.append("timeout_s must be positive")
        # Docker's own floor for a memory limit is 6 MB.
        if self.memory_mb < 6:
            problems.append("memory_mb must be at least 6")
        if not self.cpus > 0:
            problems.append("cpus must be positive")
        if self.pids < 1:
            problems.append("pids must be at least 1")
        if self.work_mb < 1:
            problems.append("work_mb must be at least 1")
        if self.gpus < -1:
            problems.append("gpus must be -1 (all), 0 (none) or a count")
        if self.max_output_mb < 0:
            problems.append("max_output_mb must not be negative")
        if any("=" in key or not key or "\0" in key + value for key, value in self.env.items()):
            problems.append("env names must be non-empty, without '=' or NUL")
        if problems:
            raise SandboxRefused("; ".join(problems))


@dataclass
class OutputFile:
    name: str
    path: Path
    size: int
    sha256: str


@dataclass
class RunResult:
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    cancelled: bool
    stdout_tail: str
    stderr_tail: str
    outputs: list[OutputFile]
    duration_s: float
    error: str | None
    # The host directory that holds `outputs`; it lives until cleanup().
    workspace: Path | None = field(default=None, repr=False)
    # When the job's process started (time.monotonic()): what came before it is the sandbox's
    # start, which the agent reports with each attempt.
    started_at: float | None = None
    # What the sandbox still holds for this result (a warm container, frozen), let go by
    # cleanup(): after the report, so that the hub need not wait for it.
    release: Callable[[], None] | None = field(default=None, repr=False)

    @classmethod
    def infrastructure_error(cls, error: str, *, workspace: Path | None = None) -> RunResult:
        """A run that never got going: the job did not run, or its result cannot be trusted."""
        return cls(
            exit_code=None,
            timed_out=False,
            oom_killed=False,
            cancelled=False,
            stdout_tail="",
            stderr_tail="",
            outputs=[],
            duration_s=0.0,
            error=error,
            workspace=workspace,
        )

    def cleanup(self) -> None:
        if self.release is not None:
            release, self.release = self.release, None
            release()
        if self.workspace is None:
            return
        remove_tree(self.workspace)
        self.workspace = None


class Sandbox(Protocol):
    name: str

    def run(
        self,
        req: RunRequest,
        *,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
        hold: threading.Event | None = None,
    ) -> RunResult: ...

    def close(self) -> None:
        """Give back what the sandbox keeps between jobs (pre-started containers)."""


def job_env(
    req: RunRequest, *, in_dir: str = INPUT_DIR, out_dir: str = OUTPUT_DIR, work_dir: str = WORK_DIR
) -> dict[str, str]:
    """The variables every job finds, whichever sandbox runs it; the request's own win."""
    return {
        "HOME": work_dir,
        "TMPDIR": work_dir,
        "COMPUTEPOOL_IN": in_dir,
        "COMPUTEPOOL_OUT": out_dir,
        "COMPUTEPOOL_WORK": work_dir,
        **req.env,
    }


def remove_tree(path: Path) -> None:
    def report(
        _function: object, failed: str, exc_info: tuple[type, BaseException, object]
    ) -> None:
        log.warning("could not remove %s: %s", failed, exc_info[1])

    shutil.rmtree(path, onerror=report)
