"""Looking at the machine for the owner's rules: input idle time, battery, the clock, the
programs that pause the agent, GPU temperature and the pause flag."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import psutil

from agent.owner.idle import IdleSource
from agent.owner.rules import OwnerRules
from agent.owner.state import StateDir
from agent.owner.verdict import Observation


def on_battery() -> bool | None:
    try:
        battery = psutil.sensors_battery()
    except (AttributeError, NotImplementedError, OSError):  # not on every platform
        return None
    return None if battery is None else not battery.power_plugged


def programs_running(names: tuple[str, ...]) -> tuple[str, ...]:
    """Which of `names` run now, matched on the process name without case or ".exe"."""
    if not names:
        return ()
    wanted = {_bare(name): name for name in names}
    found = set()
    for proc in psutil.process_iter(["name"]):
        name = _bare(proc.info["name"] or "")
        if name in wanted:
            found.add(wanted[name])
    return tuple(sorted(found))


def _bare(name: str) -> str:
    name = name.lower()
    return name[:-4] if name.endswith(".exe") else name


def hottest_gpu(gpus: list[dict[str, Any]]) -> float | None:
    temps = [gpu.get("temperature_c") for gpu in gpus]
    temps = [t for t in temps if isinstance(t, int | float) and not isinstance(t, bool)]
    return max(temps) if temps else None


class Observer:
    def __init__(
        self,
        *,
        rules: OwnerRules,
        idle: IdleSource,
        state: StateDir,
        gpu_state: Callable[[], list[dict[str, Any]]],
        battery: Callable[[], bool | None] = on_battery,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.rules = rules
        self.idle = idle
        self.state = state
        self._gpu_state = gpu_state
        self._battery = battery
        self._clock = clock

    def observe(self) -> Observation:
        try:
            gpus = self._gpu_state()
        except Exception:  # a failing sensor reads as no reading, never as a crash
            gpus = []
        try:
            idle_s = self.idle.idle_s()
        except Exception:  # a desktop library that breaks reads as "cannot tell"
            idle_s = None
        return Observation(
            idle_s=idle_s,
            idle_source=self.idle.name,
            on_battery=self._battery(),
            local_time=self._clock().time(),
            programs=programs_running(self.rules.pause_programs),
            gpu_temp_c=hottest_gpu(gpus),
            paused=self.state.paused(),
        )
