"""A cgroup (v1) per job for the process sandboxes: the memory, pids and CPU limits that
bubblewrap lacks. Only root can make one; without it the limits fall back to rlimits."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from agent.sandbox.base import MIB, RunRequest

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "computepool"
CPU_PERIOD_US = 100_000
CONTROLLERS = ("memory", "pids", "cpu")


def cgroups_v1_usable() -> bool:
    return os.geteuid() == 0 and (CGROUP_ROOT / "memory" / "memory.limit_in_bytes").is_file()


@dataclass
class JobCgroup:
    name: str
    dirs: dict[str, Path]

    @classmethod
    def create(cls, name: str, req: RunRequest) -> JobCgroup | None:
        """None where this process cannot make cgroups (not root, cgroup v2, read-only mount)."""
        if not cgroups_v1_usable():
            return None
        cgroup = cls(name, {})
        try:
            for controller in CONTROLLERS:
                if (CGROUP_ROOT / controller / "tasks").is_file():
                    directory = CGROUP_ROOT / controller / PARENT / name
                    directory.mkdir(parents=True)
                    cgroup.dirs[controller] = directory
            cgroup._limit(req)
        except OSError as exc:
            log.warning("could not set up a cgroup for the job (%s); using rlimits only", exc)
            cgroup.remove()
            return None
        return cgroup

    def _limit(self, req: RunRequest) -> None:
        memory = self.dirs.get("memory")
        if memory is not None:
            limit = str(req.memory_mb * MIB)
            (memory / "memory.limit_in_bytes").write_text(limit)
            # Without this the job could swap past its limit; it must follow limit_in_bytes.
            memsw = memory / "memory.memsw.limit_in_bytes"
            if memsw.is_file():
                memsw.write_text(limit)
        if "pids" in self.dirs:
            (self.dirs["pids"] / "pids.max").write_text(str(req.pids))
        if "cpu" in self.dirs:
            (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            quota = max(1000, int(req.cpus * CPU_PERIOD_US))
            (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))

    @property
    def limits_memory(self) -> bool:
        return "memory" in self.dirs

    @property
    def limits_pids(self) -> bool:
        return "pids" in self.dirs

    def procs_files(self) -> list[Path]:
        return [directory / "cgroup.procs" for directory in self.dirs.values()]

    def oom_killed(self) -> bool:
        memory = self.dirs.get("memory")
        if memory is None:
            return False
        for line in (memory / "memory.oom_control").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value) > 0
        # Kernels before 4.13 keep no kill count; hitting the limit is the best sign left.
        return int((memory / "memory.failcnt").read_text()) > 0

    def kill_all(self) -> None:
        """Whatever is left in the job's cgroup, wherever it wandered in the process tree."""
        for procs in self.procs_files():
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)

    def remove(self) -> None:
        for directory in self.dirs.values():
            # A killed process leaves its cgroup a moment after it is reaped.
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all()
                    time.sleep(0.02)
            else:
                log.warning("could not remove cgroup %s", directory)
