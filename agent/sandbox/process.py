"""Running a job as a local process tree (bubblewrap, or no sandbox at all) under supervision."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from typing import IO

import psutil

from agent.sandbox.base import RunRequest, RunResult
from agent.sandbox.cgroups import JobCgroup
from agent.sandbox.streams import OutputSink
from agent.sandbox.supervision import Stop, build_result, supervise
from agent.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

KILL_GRACE_S = 10.0
READER_JOIN_S = 5.0
READ_CHUNK = 64 * 1024

# Joins the cgroups named before `--`, then becomes the rest of the command line. Written as
# a shell step rather than a preexec_fn, which is unsafe in a process with threads.
JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'


def in_cgroup(argv: list[str], cgroup: JobCgroup | None) -> list[str]:
    if cgroup is None:
        return argv
    files = [str(path) for path in cgroup.procs_files()]
    return ["/bin/sh", "-c", JOIN_CGROUPS, "sh", *files, "--", *argv]


def _pump(pipe: IO[bytes], stream: str, sink: OutputSink) -> None:
    with pipe:
        while chunk := os.read(pipe.fileno(), READ_CHUNK):
            sink.feed(stream, chunk)


def _kill_group(pid: int, cgroup: JobCgroup | None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if cgroup is not None:
        cgroup.kill_all()


def freeze_tree(pid: int, on: bool) -> None:
    """SIGSTOP (or SIGCONT) the job's process and every descendant. The tree, not the process
    group: bubblewrap's --new-session puts the job in a session of its own. Stopped
    processes fork nothing, so a second pass catches a child forked during the first."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for _ in range(2 if on else 1):
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                if on:
                    proc.suspend()
                else:
                    proc.resume()


def run_process(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    req: RunRequest,
    workspace: Workspace,
    sink: OutputSink,
    cancel: threading.Event | None,
    cgroup: JobCgroup | None,
    hold: threading.Event | None = None,
) -> RunResult:
    """Run `argv` in its own session and kill the whole group when it must stop. The caller
    owns `workspace` and `cgroup`; the result points at the workspace."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    started_at = time.monotonic()
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_pump, args=(pipe, name, sink), daemon=True)
        for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))
    ]
    for reader in readers:
        reader.start()
    exited = threading.Event()
    ended_at = [0.0]

    def wait() -> None:
        # WNOWAIT leaves the exited leader unreaped, so its group id cannot be reused by an
        # unrelated process before the group is killed below.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        ended_at[0] = time.monotonic()
        exited.set()

    threading.Thread(target=wait, name=f"wait-{proc.pid}", daemon=True).start()

    supervision = supervise(
        exited,
        req=req,
        workspace=workspace,
        cancel=cancel,
        hold=hold,
        freeze=lambda on: freeze_tree(proc.pid, on),
    )
    if supervision.stop is not Stop.EXITED:
        log.info("job (pid %d): %s; killing it", proc.pid, supervision.stop.value)
    # Always: background children of a job that exited must not outlive it.
    _kill_group(proc.pid, cgroup)
    if not exited.wait(KILL_GRACE_S):
        return RunResult.infrastructure_error(
            f"process {proc.pid} survived a kill", workspace=workspace.root
        )
    code = proc.wait()
    for reader in readers:
        reader.join(READER_JOIN_S)
        if reader.is_alive():
            log.warning(
                "job (pid %d): a process outside its group still holds its output", proc.pid
            )
    return build_result(
        supervision,
        req=req,
        workspace=workspace,
        sink=sink,
        # Like a container's exit status: 128 + the signal that ended it.
        exit_code=128 - code if code < 0 else code,
        oom_killed=cgroup.oom_killed() if cgroup is not None else False,
        duration_s=ended_at[0] - started_at,
        started_at=started_at,
    )
