"""How long since the owner last touched the machine, by whatever this OS can tell.

Each source answers `idle_s()` (seconds since the last keyboard or mouse input) or None when it
cannot tell right now. `idle_source_select` takes the first that answers, in the order below,
and falls back to `CpuBusySource`, which cannot see input at all: it reports how long the
programs other than the agent and its jobs have stayed below a CPU share.

| OS | tried in order |
|---|---|
| Linux, X11 | `xprintidle` on PATH; the XScreenSaver extension through ctypes (libXss) |
| Linux, Wayland | logind's IdleHint/IdleSinceHint of the active graphical session (`loginctl`) |
| macOS | `ioreg -c IOHIDSystem`, HIDIdleTime |
| Windows | `GetLastInputInfo` (user32) |
| anywhere else, or when those fail | CPU busy share of other processes (psutil) |
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import psutil

log = logging.getLogger(__name__)

TOOL_TIMEOUT_S = 2.0
GRAPHICAL_SESSIONS = ("x11", "wayland", "mir")
# The container runtime's shims: our Docker jobs run under them, not under the agent.
CONTAINER_SHIMS = ("containerd-shim", "containerd-shim-runc-v2", "runsc", "runsc-sandbox")


class IdleSource(Protocol):
    name: str

    def idle_s(self) -> float | None: ...


Run = Callable[[Sequence[str]], str | None]


def run_tool(argv: Sequence[str]) -> str | None:
    """A tool's standard output, or None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


class XprintidleSource:
    name = "X11 (xprintidle)"

    def __init__(self, run: Run = run_tool) -> None:
        self._run = run

    def idle_s(self) -> float | None:
        out = self._run(["xprintidle"])
        try:
            return int(out.strip()) / 1000 if out is not None else None
        except ValueError:
            return None


class _XScreenSaverInfo(ctypes.Structure):
    _fields_ = [
        ("window", ctypes.c_ulong),
        ("state", ctypes.c_int),
        ("kind", ctypes.c_int),
        ("til_or_since", ctypes.c_ulong),
        ("idle", ctypes.c_ulong),
        ("eventMask", ctypes.c_ulong),
    ]


class XScreenSaverSource:
    """libXss's XScreenSaverQueryInfo: the X server's own idle counter, in milliseconds."""

    name = "X11 (XScreenSaver extension)"

    def __init__(self) -> None:
        self._display = None
        x11, xss = ctypes.util.find_library("X11"), ctypes.util.find_library("Xss")
        if not (x11 and xss and os.environ.get("DISPLAY")):
            return
        try:
            self._x11 = ctypes.CDLL(x11)
            self._xss = ctypes.CDLL(xss)
        except OSError:
            return
        self._x11.XOpenDisplay.restype = ctypes.c_void_p
        self._x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
        self._x11.XDefaultRootWindow.restype = ctypes.c_ulong
        self._x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        self._xss.XScreenSaverAllocInfo.restype = ctypes.POINTER(_XScreenSaverInfo)
        self._xss.XScreenSaverQueryInfo.argtypes = [
            ctypes.c_void_p,
            ctypes.c_ulong,
            ctypes.POINTER(_XScreenSaverInfo),
        ]
        self._display = self._x11.XOpenDisplay(None)
        if self._display:
            self._info = self._xss.XScreenSaverAllocInfo()

    def idle_s(self) -> float | None:
        if not self._display:
            return None
        root = self._x11.XDefaultRootWindow(self._display)
        if not self._xss.XScreenSaverQueryInfo(self._display, root, self._info):
            return None
        return self._info.contents.idle / 1000


class LogindSource:
    """systemd-logind's idle hint of the active graphical session: what GNOME and KDE set on
    Wayland, where no program may read another's input."""

    name = "logind (IdleHint)"

    def __init__(self, run: Run = run_tool, clock: Callable[[], float] = time.time) -> None:
        self._run = run
        self._clock = clock

    def idle_s(self) -> float | None:
        listing = self._run(["loginctl", "list-sessions", "--no-legend"])
        if listing is None:
            return None
        idles = []
        for line in listing.splitlines():
            if not line.split():
                continue
            shown = self._run(
                ["loginctl", "show-session", line.split()[0],
                 "-p", "Type", "-p", "Active", "-p", "IdleHint", "-p", "IdleSinceHint"]
            )  # fmt: skip
            props = dict(row.split("=", 1) for row in (shown or "").splitlines() if "=" in row)
            if props.get("Type") not in GRAPHICAL_SESSIONS or props.get("Active") != "yes":
                continue
            if props.get("IdleHint") != "yes":
                idles.append(0.0)
                continue
            try:
                since_us = int(props.get("IdleSinceHint", ""))
            except ValueError:
                continue
            idles.append(max(0.0, self._clock() - since_us / 1e6) if since_us else 0.0)
        return min(idles) if idles else None


class IoregSource:
    name = "macOS (ioreg HIDIdleTime)"
    _IDLE = re.compile(r'"HIDIdleTime"\s*=\s*(\d+)')

    def __init__(self, run: Run = run_tool) -> None:
        self._run = run

    def idle_s(self) -> float | None:
        out = self._run(["ioreg", "-c", "IOHIDSystem", "-d", "4"])
        match = self._IDLE.search(out or "")
        return int(match.group(1)) / 1e9 if match else None


class _LastInputInfo(ctypes.Structure):
    _fields_ = [("cbSize", ctypes.c_uint), ("dwTime", ctypes.c_uint)]


class WindowsLastInputSource:
    name = "Windows (GetLastInputInfo)"

    def idle_s(self) -> float | None:
        windll = getattr(ctypes, "windll", None)
        if windll is None:
            return None
        info = _LastInputInfo(cbSize=ctypes.sizeof(_LastInputInfo))
        if not windll.user32.GetLastInputInfo(ctypes.byref(info)):
            return None
        # Both are 32-bit millisecond tick counts, which wrap every 49.7 days.
        return ((windll.kernel32.GetTickCount() - info.dwTime) & 0xFFFFFFFF) / 1000


class CpuBusySource:
    """No input to read: seconds since the programs other than this agent, its jobs and
    containers last used more than `busy_pct` of all cores (sampled at each call)."""

    name = "CPU load of other programs (fallback)"

    def __init__(
        self,
        busy_pct: float,
        *,
        own_pid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._busy_pct = busy_pct
        self._own_pid = own_pid or os.getpid()
        self._clock = clock
        self._cpus = psutil.cpu_count() or 1
        self._seen: dict[int, float] = {}
        self._at = clock()
        self._busy_at = self._at
        self.last_busy_pct = 0.0
        self.others_cpu_s()  # the baseline the first call measures from

    def _ours(self) -> set[int]:
        ours = {self._own_pid}
        with contextlib.suppress(psutil.Error):
            ours |= {child.pid for child in psutil.Process(self._own_pid).children(recursive=True)}
        return ours

    def others_cpu_s(self) -> dict[int, float]:
        """CPU seconds each other process used since the last call (those seen then only)."""
        ours, shims = self._ours(), set()
        seen: dict[int, tuple[int, float]] = {}
        for proc in psutil.process_iter(["name", "ppid", "cpu_times"]):
            info = proc.info
            if info["name"] in CONTAINER_SHIMS:
                shims.add(proc.pid)
            if info["cpu_times"] is not None:
                seen[proc.pid] = (info["ppid"], info["cpu_times"].user + info["cpu_times"].system)
        used = {}
        for pid, (_, total) in seen.items():
            before = self._seen.get(pid)
            if before is not None and pid not in ours and not _under(pid, seen, shims):
                used[pid] = max(0.0, total - before)
        self._seen = {pid: total for pid, (_, total) in seen.items()}
        return used

    def idle_s(self) -> float | None:
        used = sum(self.others_cpu_s().values())
        now = self._clock()
        elapsed = now - self._at
        self._at = now
        if elapsed > 0:
            self.last_busy_pct = 100 * used / (elapsed * self._cpus)
            if self.last_busy_pct > self._busy_pct:
                self._busy_at = now
        return now - self._busy_at


def _under(pid: int, seen: dict[int, tuple[int, float]], roots: set[int]) -> bool:
    for _ in range(64):  # a parent chain is short; a cycle (pid reuse) must not hang us
        if pid in roots:
            return True
        parent = seen.get(pid)
        if parent is None or parent[0] in (0, pid):
            return False
        pid = parent[0]
    return False


def input_sources(
    platform: str = sys.platform, env: Mapping[str, str] = os.environ, run: Run = run_tool
) -> list[IdleSource]:
    """The input-idle sources worth trying on this platform, best first."""
    if platform == "darwin":
        return [IoregSource(run)]
    if platform == "win32":
        return [WindowsLastInputSource()]
    sources: list[IdleSource] = []
    if env.get("DISPLAY"):
        if shutil.which("xprintidle", path=env.get("PATH")):
            sources.append(XprintidleSource(run))
        sources.append(XScreenSaverSource())
    if shutil.which("loginctl", path=env.get("PATH")):
        sources.append(LogindSource(run))
    return sources


def idle_source_select(
    busy_cpu_pct: float, candidates: Sequence[IdleSource] | None = None
) -> IdleSource:
    """The first source that can tell now, else the CPU fallback."""
    for source in input_sources() if candidates is None else candidates:
        try:
            if source.idle_s() is not None:
                return source
        except Exception as exc:  # a broken desktop library must not stop the agent
            log.debug("idle source %s failed: %s", source.name, exc)
    return CpuBusySource(busy_cpu_pct)
