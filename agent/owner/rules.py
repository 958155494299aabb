"""The owner's rules: when this machine may work for the pool, and how much of it the pool gets.

They come from the configuration file and the flags of `run`, and are checked once here, so a
rule that cannot hold (a window of "25:00-07:00", 150 % of the cores) stops the agent at start
with the setting named rather than quietly never taking work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import time
from typing import Any

ON_RETURN_CHOICES = ("hand_back", "suspend")
_HOURS = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class OwnerRules:
    # Minutes without keyboard or mouse input (or, where the OS cannot tell, with little CPU
    # used by other programs) before work starts; 0 works whatever the owner does.
    idle_minutes: float = 0.0
    run_on_battery: bool = False
    # "HH:MM-HH:MM", local time; a window may run over midnight ("22:00-07:00"). "" is any time.
    active_hours: str = ""
    # Process names (as `ps` or the task manager shows them) that pause the agent: a game.
    pause_programs: tuple[str, ...] = ()
    # What the pool may use: shares of the cores and of the GPUs' memory, RAM in GB (0: all).
    max_cpu_pct: int = 100
    max_ram_gb: float = 0.0
    max_gpu_mem_pct: int = 100
    # When the owner comes back: hand running work back to the hub, or suspend it in place and
    # hand it back only if the owner is still there after suspend_max_s.
    on_owner_return: str = "hand_back"
    suspend_max_s: float = 600.0
    # The CPU fallback: other programs using more than this share of all cores count as the
    # owner at work.
    busy_cpu_pct: float = 25.0
    # GPU temperatures: above max_temp_c no new work; above critical_temp_c work stops.
    max_temp_c: float = 85.0
    critical_temp_c: float = 95.0

    def problems(self) -> list[str]:
        problems = []
        for name in ("idle_minutes", "max_ram_gb", "suspend_max_s"):
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                problems.append(f"{name} must be a number ≥ 0 (got {getattr(self, name)!r})")
        for name in ("max_cpu_pct", "max_gpu_mem_pct"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
                problems.append(f"{name} must be an integer from 1 to 100 (got {value!r})")
        if not _number(self.busy_cpu_pct) or not 0 < self.busy_cpu_pct <= 100:
            problems.append(
                f"busy_cpu_pct must be above 0 and at most 100 (got {self.busy_cpu_pct!r})"
            )
        if not isinstance(self.run_on_battery, bool):
            problems.append(f"run_on_battery must be true or false (got {self.run_on_battery!r})")
        if not isinstance(self.active_hours, str) or (
            self.active_hours and not _HOURS.match(self.active_hours)
        ):
            problems.append(f'active_hours must be "HH:MM-HH:MM" or "" (got {self.active_hours!r})')
        if not all(isinstance(name, str) and name for name in self.pause_programs):
            problems.append("pause_programs must be a list of program names")
        if self.on_owner_return not in ON_RETURN_CHOICES:
            problems.append(f"on_owner_return must be one of {', '.join(ON_RETURN_CHOICES)}")
        temps = (self.max_temp_c, self.critical_temp_c)
        if not all(_number(t) and t > 0 for t in temps):
            problems.append("max_temp_c and critical_temp_c must be positive numbers")
        elif self.max_temp_c > self.critical_temp_c:
            problems.append("max_temp_c must not be above critical_temp_c")
        return problems

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> OwnerRules:
        """The rules from a mapping that may hold other settings too (the whole config)."""
        known = {f.name for f in fields(cls)}
        picked = {name: value for name, value in values.items() if name in known}
        if isinstance(picked.get("pause_programs"), list):
            picked["pause_programs"] = tuple(picked["pause_programs"])
        return cls(**picked)

    def hours(self) -> tuple[time, time] | None:
        match = _HOURS.match(self.active_hours)
        if match is None:
            return None
        h1, m1, h2, m2 = (int(part) for part in match.groups())
        return time(h1, m1), time(h2, m2)


def in_window(window: tuple[time, time] | None, now: time) -> bool:
    """Whether `now` is inside [start, end); a window whose end comes before its start runs
    over midnight, and one that starts where it ends is the whole day."""
    if window is None:
        return True
    start, end = window
    if start == end:
        return True
    if start < end:
        return start <= now < end
    return now >= start or now < end


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rule_names() -> list[str]:
    return [f.name for f in fields(OwnerRules)]
