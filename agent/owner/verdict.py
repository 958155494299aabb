"""One decision, from what was observed and the owner's rules: may this machine take work now,
and what becomes of the work it is running. Pure, so every rule is tested without a desktop."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time

from agent.owner.rules import OwnerRules, in_window

# What to do with running work when the verdict is no.
KEEP = ""  # let it finish (too warm for more, but not dangerous)
OWNER = "owner"  # the owner wants the machine: suspend or hand back (OwnerRules.on_owner_return)
THERMAL = "thermal"  # critical temperature: stop it and report an infrastructure failure


@dataclass(frozen=True)
class Observation:
    idle_s: float | None  # since the last input (or since other programs were last busy)
    idle_source: str
    on_battery: bool | None  # None: no battery, or the OS does not say
    local_time: time
    programs: tuple[str, ...]  # the pause_programs found running
    gpu_temp_c: float | None  # the hottest GPU, None without one
    paused: bool  # `computepool-agent pause`


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    running: str = KEEP  # for a no: KEEP, OWNER or THERMAL


def may_take_work(seen: Observation, rules: OwnerRules) -> Verdict:
    """The first rule that says no, in order of urgency; else yes, with why."""
    temp = seen.gpu_temp_c
    if temp is not None and temp >= rules.critical_temp_c:
        why = f"GPU at {temp:g} °C, at or above the critical {rules.critical_temp_c:g} °C"
        return Verdict(False, why, THERMAL)
    if seen.paused:
        return Verdict(False, "paused by the owner (computepool-agent resume)", OWNER)
    if seen.programs:
        return Verdict(False, f"{', '.join(seen.programs)} running", OWNER)
    if seen.on_battery and not rules.run_on_battery:
        return Verdict(False, "on battery", OWNER)
    if not in_window(rules.hours(), seen.local_time):
        return Verdict(False, f"outside the active hours {rules.active_hours}", OWNER)
    wanted = rules.idle_minutes * 60
    if wanted > 0:
        if seen.idle_s is None:
            return Verdict(
                False, f"cannot tell whether the machine is idle ({seen.idle_source})", OWNER
            )
        if seen.idle_s < wanted:
            return Verdict(
                False,
                f"in use: idle {_minutes(seen.idle_s)} of {rules.idle_minutes:g} min "
                f"({seen.idle_source})",
                OWNER,
            )
    if temp is not None and temp >= rules.max_temp_c:
        why = f"GPU at {temp:g} °C, at or above {rules.max_temp_c:g} °C: no new work"
        return Verdict(False, why, KEEP)
    if wanted > 0:
        assert seen.idle_s is not None
        return Verdict(True, f"idle for {_minutes(seen.idle_s)} ({seen.idle_source})")
    return Verdict(True, "no idle rule: working whenever the other rules allow")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
