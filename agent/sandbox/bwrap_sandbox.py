"""Jobs under bubblewrap: the Linux fallback where no Docker engine answers.

There are no images here: the job sees the host's /usr and /etc read-only, a size-capped /work,
/in and /out, and nothing else of the machine. The image is still checked against the
allow-list, which then says which kinds of job the operator accepts. Limits: a cgroup when the
agent runs as root (memory, pids, CPU), rlimits otherwise (address space, processes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import psutil

from agent.sandbox.base import (
    INPUT_DIR,
    MIB,
    OUTPUT_DIR,
    SANDBOX_GID,
    SANDBOX_UID,
    WORK_DIR,
    RunRequest,
    RunResult,
    SandboxUnavailable,
    job_env,
)
from agent.sandbox.cgroups import JobCgroup
from agent.sandbox.common import SandboxBase
from agent.sandbox.images import ImagePolicy
from agent.sandbox.process import in_cgroup, run_process
from agent.sandbox.streams import OutputSink
from agent.sandbox.workspace import Workspace

SHM_MB = 64
# Top-level names that merged-/usr systems keep as links into /usr (real directories elsewhere).
ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PATH = "/usr/local/bin:/usr/bin:/bin"


def find_bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
    return path


def _host_root_mounts() -> list[str]:
    return ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", *root_links()]


def root_links() -> list[str]:
    """The top-level links into /usr (or the directories they are elsewhere), as the host has
    them."""
    args = []
    for name in ROOT_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


def bwrap_argv(bwrap: str, req: RunRequest, workspace: Workspace) -> list[str]:
    env = {"PATH": PATH, **job_env(req)}
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        # A new session keeps the job from pushing keystrokes into the agent's terminal.
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        *_host_root_mounts(),
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        str(SHM_MB * MIB),
        "--tmpfs",
        "/dev/shm",  # noqa: S108 (the sandbox's own shm, not a host temp path)
        "--proc",
        "/proc",
        "--size",
        str(req.work_mb * MIB),
        "--tmpfs",
        WORK_DIR,
        "--ro-bind",
        str(workspace.in_dir),
        INPUT_DIR,
        "--bind",
        str(workspace.out_dir),
        OUTPUT_DIR,
        # Last: bubblewrap's own root is a writable tmpfs until it is made read-only.
        "--remount-ro",
        "/",
        "--chdir",
        WORK_DIR,
        "--clearenv",
    ]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *req.command]


def _user_tasks(uid: int) -> int:
    """What RLIMIT_NPROC counts: every thread of every process of the user."""
    return sum(
        proc.info["num_threads"] or 1
        for proc in psutil.process_iter(["uids", "num_threads"])
        if proc.info["uids"] is not None and proc.info["uids"].real == uid
    )


def limited(argv: list[str], req: RunRequest, cgroup: JobCgroup | None) -> list[str]:
    """Wrap `argv` in what limits it: a cgroup and a drop to the sandbox user when root,
    rlimits for whatever the cgroup does not cover."""
    rlimits = []
    if cgroup is None or not cgroup.limits_memory:
        rlimits.append(f"--as={req.memory_mb * MIB}")
    if cgroup is None or not cgroup.limits_pids:
        # RLIMIT_NPROC counts the whole user, not this job: allow the job `pids` more.
        uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
        rlimits.append(f"--nproc={req.pids + _user_tasks(uid)}")
    if rlimits:
        argv = ["prlimit", *rlimits, "--", *argv]
    if os.geteuid() == 0:
        # Inside its user namespace the job would otherwise act on host files as root.
        drop = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]
        argv = ["setpriv", *drop, "--", *argv]
    return in_cgroup(argv, cgroup)


def probe_bwrap() -> None:
    """Run a trivial job the way real ones run; raises SandboxUnavailable with bwrap's reason."""
    bwrap = find_bwrap()
    req = RunRequest(image="", command=["true"], env={}, inputs={}, timeout_s=10)
    workspace = Workspace.create({})
    try:
        argv = limited(bwrap_argv(bwrap, req, workspace), req, cgroup=None)
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap cannot start: {exc}") from exc
    finally:
        workspace.remove()
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        raise SandboxUnavailable(f"bubblewrap cannot create its namespaces here: {reason}")


class BwrapSandbox(SandboxBase):
    name = "bwrap"
    refuse_gpus = "GPU jobs need the Docker sandbox; bubblewrap gives no GPU"
    start_error = "could not run bubblewrap"

    def __init__(
        self,
        *,
        policy: ImagePolicy,
        bwrap: str | None = None,
        cgroups: bool = True,
        node: str | None = None,
    ) -> None:
        """`cgroups=False` leaves limits to rlimits even where a cgroup could be made (for a
        host whose cgroups are managed by something else)."""
        super().__init__(policy=policy, node=node)
        self._bwrap = bwrap or find_bwrap()
        self._cgroups = cgroups

    def _execute(
        self,
        req: RunRequest,
        workspace: Workspace,
        sink: OutputSink,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> RunResult:
        cgroup = JobCgroup.create(f"job-{uuid.uuid4().hex[:12]}", req) if self._cgroups else None
        try:
            argv = limited(bwrap_argv(self._bwrap, req, workspace), req, cgroup)
            return run_process(
                argv,
                env={"PATH": os.environ.get("PATH", PATH)},
                cwd="/",
                req=req,
                workspace=workspace,
                sink=sink,
                cancel=cancel,
                hold=hold,
                cgroup=cgroup,
            )
        finally:
            if cgroup is not None:
                cgroup.remove()
