"""Running the outside world: tools, modules, ``which``, all behind one injectable ``Host``.

Every detection step reaches the machine through a ``Host``. The default one runs real
processes; tests pass one whose runner answers with recorded output, whose ``which`` finds
nothing, or whose ``import_module`` fails, to prove the fallback order without the tools.

Nothing here may hang the agent: processes run in their own session and the whole group is
killed at the timeout; in-process libraries (NVML, GPUtil) run on a daemon thread that is
abandoned at the timeout.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 15.0


class ToolFailed(Exception):
    """A tool could not be run or did not answer in time."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class ToolOutput:
    returncode: int
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line saying why the tool failed (its last line of error output)."""
        lines = (self.stderr.strip() or self.stdout.strip()).splitlines()
        detail = lines[-1].strip() if lines else "no output"
        return f"exit status {self.returncode}: {detail}"


Runner = Callable[[Sequence[str], float], ToolOutput]


def run_tool(argv: Sequence[str], timeout_s: float) -> ToolOutput:
    """Run a tool with a hard timeout; raises ToolFailed when it is missing or hangs."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            # Its own process group, so a timeout also kills whatever the tool started.
            start_new_session=os.name == "posix",
        )
    except FileNotFoundError as exc:
        raise ToolFailed(f"{argv[0]} not found") from exc
    except OSError as exc:
        raise ToolFailed(f"{argv[0]} could not start: {exc}") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        _kill(process)
        raise ToolFailed(f"{argv[0]} timed out after {timeout_s:g} s", timed_out=True) from exc
    return ToolOutput(process.returncode, stdout, stderr)


def _kill(process: subprocess.Popen[str]) -> None:
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    else:
        process.kill()
    try:
        process.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        # A grandchild that left the group still holds the pipes: stop reading them.
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait(timeout=2)


def call_bounded(function: Callable[[], T], timeout_s: float, what: str) -> T:
    """Call an in-process library that may block forever (a wedged driver) with a timeout.

    A thread cannot be killed: on timeout it is left running as a daemon, and the agent goes on.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"detect-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ToolFailed(f"{what} did not answer within {timeout_s:g} s", timed_out=True)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


@dataclass(frozen=True)
class Host:
    """The machine as detection sees it; every field can be replaced in tests."""

    run: Runner = run_tool
    which: Callable[[str], str | None] = shutil.which
    import_module: Callable[[str], ModuleType] = importlib.import_module
    system: str = field(default_factory=platform.system)
    machine: str = field(default_factory=platform.machine)
    release: str = field(default_factory=platform.release)
    cpuinfo_path: Path = Path("/proc/cpuinfo")
    timeout_s: float = DEFAULT_TIMEOUT_S

    def tool(self, argv: Sequence[str]) -> ToolOutput:
        return self.run(argv, self.timeout_s)

    def bounded(self, function: Callable[[], T], what: str) -> T:
        return call_bounded(function, self.timeout_s, what)
