"""Run a program of the agent's own code (the inference engine, the hardware benchmark) under
the sandbox rules that apply to jobs, without an image: bubblewrap with the interpreter and this
code mounted read-only.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from agent.sandbox.base import MIB, SANDBOX_GID, SANDBOX_UID
from agent.sandbox.bwrap_sandbox import PATH, root_links

log = logging.getLogger(__name__)


def _readable_roots() -> list[str]:
    """What such a process must read beyond /usr: the interpreter, its libraries, this
    code; and of /etc only what the dynamic loader reads."""
    code = str(Path(__file__).resolve().parents[2])
    roots = {sys.base_prefix, sys.prefix, code, "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d"}  # fmt: skip
    return sorted(r for r in roots if not r.startswith("/usr/") and Path(r).exists())


def sandboxed(argv: list[str], *, memory_mb: int | None, gpu: bool) -> tuple[list[str], dict]:
    """(argv, environment) for `argv`, a program of this agent's own code, under bubblewrap
    when installed: no network, no other namespace shared, no capabilities, user 65534 inside,
    and a view of the machine limited to /usr, the interpreter and this code, read-only; with
    an address-space cap. `gpu` gives it the machine's devices (the GPU's among them).

    An agent run as root starts bubblewrap as root, so the files the process sees (all of them
    read-only, none of them secret) are read with root's owner rights: the interpreter may live
    where no other user can walk (/root/.pyenv). Run the agent as a user of its own where that
    matters; docs/operators.md says so.

    Not --die-with-parent: that fires when the *thread* that started bubblewrap ends, and
    engines are started from a request's thread. Such a process ends when its stdin closes
    instead, which the death of the agent does."""
    code = str(Path(__file__).resolve().parents[2])
    env = {"PATH": PATH, "HOME": "/tmp", "PYTHONPATH": code, "LANG": "C.UTF-8"}  # noqa: S108
    bwrap = shutil.which("bwrap")
    if bwrap:
        binds = []
        for root in _readable_roots():
            binds += ["--ro-bind", root, root]
        argv = [
            bwrap, "--unshare-all", "--new-session", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--ro-bind", "/usr", "/usr", *root_links(),
            *(["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]),
            "--proc", "/proc", "--tmpfs", "/tmp",  # noqa: S108 (its own)
            # After /tmp's tmpfs, which would hide a checkout or interpreter under /tmp.
            *binds, "--chdir", "/", "--", *argv,
        ]  # fmt: skip
    else:
        log.warning("bubblewrap is not installed: %s runs unisolated", " ".join(argv))
    if memory_mb:
        argv = ["prlimit", f"--as={memory_mb * MIB}", "--", *argv]
    return argv, env
