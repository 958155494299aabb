"""The owner's rules: checking them, the one decision, the shares reported to the hub, and the
idle sources (tools' output where the OS here cannot give it; real processes otherwise)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import time as clock
from pathlib import Path

import psutil
import pytest

from agent.config import AgentConfig, ConfigError
from agent.owner import KEEP, OWNER, THERMAL, Observation, OwnerRules, StateDir, may_take_work
from agent.owner.caps import capabilities_capped, models_vram_cap
from agent.owner.idle import (
    CpuBusySource,
    IoregSource,
    LogindSource,
    XprintidleSource,
    idle_source_select,
)
from agent.owner.observe import hottest_gpu, programs_running
from agent.owner.rules import in_window

NOON = clock(12, 0)


def seen(**overrides: object) -> Observation:
    values: dict[str, object] = {
        "idle_s": 3600.0,
        "idle_source": "fake",
        "on_battery": False,
        "local_time": NOON,
        "programs": (),
        "gpu_temp_c": 60.0,
        "paused": False,
    }
    return Observation(**(values | overrides))  # type: ignore[arg-type]


# -- the rules themselves ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"active_hours": "25:00-07:00"}, "active_hours"),
        ({"active_hours": "22:00"}, "active_hours"),
        ({"max_cpu_pct": 0}, "max_cpu_pct"),
        ({"max_gpu_mem_pct": 150}, "max_gpu_mem_pct"),
        ({"idle_minutes": -1}, "idle_minutes"),
        ({"on_owner_return": "ignore"}, "on_owner_return"),
        ({"max_temp_c": 99, "critical_temp_c": 95}, "max_temp_c must not be above"),
        ({"busy_cpu_pct": 0}, "busy_cpu_pct"),
        ({"run_on_battery": "yes"}, "run_on_battery"),
    ],
)
def test_it_names_a_rule_that_cannot_hold(values: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        AgentConfig(hub_url="http://hub", node_id=1, agent_key="k", hub_public_key="p", **values)  # type: ignore[arg-type]


def test_flags_override_the_config_file() -> None:
    config = AgentConfig(
        hub_url="http://hub", node_id=1, agent_key="k", hub_public_key="p",
        idle_minutes=5, pause_programs=["steam"],
    )  # fmt: skip

    rules = config.owner_rules(idle_minutes=0.5, pause_programs=None, max_cpu_pct=50)

    assert (rules.idle_minutes, rules.pause_programs, rules.max_cpu_pct) == (0.5, ("steam",), 50)
    with pytest.raises(ConfigError, match="max_cpu_pct"):
        config.owner_rules(max_cpu_pct=101)


@pytest.mark.parametrize(
    ("window", "now", "inside"),
    [
        ("09:00-17:00", clock(9, 0), True),
        ("09:00-17:00", clock(17, 0), False),
        ("09:00-17:00", clock(3, 0), False),
        ("22:00-07:00", clock(23, 30), True),
        ("22:00-07:00", clock(6, 59), True),
        ("22:00-07:00", clock(7, 0), False),
        ("22:00-07:00", NOON, False),
        ("00:00-00:00", NOON, True),
        ("", NOON, True),
    ],
)
def test_a_window_may_run_over_midnight(window: str, now: clock, inside: bool) -> None:
    assert in_window(OwnerRules(active_hours=window).hours(), now) is inside


# -- the decision ------------------------------------------------------------------------------


def test_an_idle_machine_within_every_rule_takes_work() -> None:
    verdict = may_take_work(seen(), OwnerRules(idle_minutes=10, active_hours="09:00-17:00"))

    assert verdict.ok
    assert verdict.reason == "idle for 60.0 min (fake)"


@pytest.mark.parametrize(
    ("observed", "rules", "reason", "running"),
    [
        ({"idle_s": 30.0}, {"idle_minutes": 5}, "in use: idle 0.5 min of 5 min (fake)", OWNER),
        ({"idle_s": None}, {"idle_minutes": 5}, "cannot tell whether the machine is idle", OWNER),
        ({"on_battery": True}, {}, "on battery", OWNER),
        ({"local_time": clock(8, 0)}, {"active_hours": "22:00-07:00"}, "outside the active", OWNER),
        ({"programs": ("steam",)}, {"pause_programs": ("steam",)}, "steam running", OWNER),
        ({"paused": True}, {}, "paused by the owner", OWNER),
        ({"gpu_temp_c": 86.0}, {}, "GPU at 86 °C, at or above 85 °C: no new work", KEEP),
        ({"gpu_temp_c": 95.0}, {}, "at or above the critical 95 °C", THERMAL),
    ],
)
def test_each_rule_says_no_with_its_reason(
    observed: dict[str, object], rules: dict[str, object], reason: str, running: str
) -> None:
    verdict = may_take_work(seen(**observed), OwnerRules(**rules))  # type: ignore[arg-type]

    assert not verdict.ok
    assert reason in verdict.reason
    assert verdict.running == running


def test_battery_is_allowed_when_the_owner_says_so() -> None:
    assert may_take_work(seen(on_battery=True), OwnerRules(run_on_battery=True)).ok


def test_a_critical_temperature_wins_over_every_other_no() -> None:
    verdict = may_take_work(seen(gpu_temp_c=101.0, paused=True, idle_s=0.0), OwnerRules())

    assert verdict.running == THERMAL


def test_without_an_idle_rule_idle_time_does_not_matter() -> None:
    assert may_take_work(seen(idle_s=None), OwnerRules(idle_minutes=0)).ok


def test_the_hottest_gpu_is_the_one_that_counts() -> None:
    gpus = [{"temperature_c": 61}, {"temperature_c": None}, {"temperature_c": 88}]

    assert hottest_gpu(gpus) == 88
    assert hottest_gpu([{"temperature_c": None}]) is None


# -- the shares the hub sees -------------------------------------------------------------------


def test_the_hub_is_told_only_the_owners_shares() -> None:
    capabilities = {
        "cpu": {"logical_cores": 16, "physical_cores": 8},
        "ram_mb": 65536,
        "gpus": [{"vram_total_mb": 24564, "name": "RTX 4090"}],
    }
    rules = OwnerRules(max_cpu_pct=50, max_ram_gb=16, max_gpu_mem_pct=50)

    capped = capabilities_capped(capabilities, rules)

    assert capped["cpu"] == {"logical_cores": 8, "physical_cores": 4}
    assert capped["ram_mb"] == 16384
    assert capped["gpus"][0]["vram_total_mb"] == 12282
    assert capabilities["ram_mb"] == 65536  # the detected figures are left as they are


def test_models_take_no_more_gpu_memory_than_the_owners_share() -> None:
    capped = {"gpus": [{"vram_total_mb": 6000}, {"vram_total_mb": 12000}]}
    half = OwnerRules(max_gpu_mem_pct=50)

    assert models_vram_cap(0, capped, half) == 12000
    assert models_vram_cap(8000, capped, half) == 8000
    assert models_vram_cap(20000, capped, half) == 12000
    assert models_vram_cap(0, capped, OwnerRules()) == 0  # no share set: what is free
    assert models_vram_cap(0, {"gpus": []}, half) == 0


def test_no_share_set_leaves_the_capabilities_as_detected() -> None:
    capabilities = {"cpu": {"logical_cores": 1}, "ram_mb": 2048, "gpus": []}

    assert capabilities_capped(capabilities, OwnerRules()) == capabilities


# -- the idle sources --------------------------------------------------------------------------


class Tools:
    """What a desktop's tools print, for the OSes this machine is not."""

    def __init__(self, outputs: dict[tuple[str, ...], str | None]) -> None:
        self.outputs = outputs

    def __call__(self, argv: Sequence[str]) -> str | None:
        return self.outputs.get(tuple(argv))


def test_xprintidle_reports_milliseconds() -> None:
    assert XprintidleSource(Tools({("xprintidle",): "65000\n"})).idle_s() == 65.0
    assert XprintidleSource(Tools({("xprintidle",): "oops"})).idle_s() is None


def test_macos_reads_hid_idle_time_in_nanoseconds() -> None:
    ioreg = '    | |   "HIDIdleTime" = 120500000000\n'
    source = IoregSource(Tools({("ioreg", "-c", "IOHIDSystem", "-d", "4"): ioreg}))

    assert source.idle_s() == pytest.approx(120.5)


def test_logind_reads_the_active_graphical_session() -> None:
    show = ("loginctl", "show-session")
    props = ("-p", "Type", "-p", "Active", "-p", "IdleHint", "-p", "IdleSinceHint")
    tools = Tools(
        {
            ("loginctl", "list-sessions", "--no-legend"): "3 1000 alice seat0 tty2\n7 0 root\n",
            (*show, "3", *props): (
                "Type=wayland\nActive=yes\nIdleHint=yes\nIdleSinceHint=1000000000\n"
            ),
            (*show, "7", *props): "Type=tty\nActive=yes\nIdleHint=no\nIdleSinceHint=0\n",
        }
    )  # fmt: skip

    assert LogindSource(tools, clock=lambda: 1300.0).idle_s() == 300.0
    busy = Tools(tools.outputs | {(*show, "3", *props): "Type=x11\nActive=yes\nIdleHint=no\n"})
    assert LogindSource(busy, clock=lambda: 1300.0).idle_s() == 0.0
    headless = Tools(tools.outputs | {(*show, "3", *props): "Type=tty\nActive=yes\n"})
    assert LogindSource(headless).idle_s() is None


class Silent:
    name = "silent"

    def idle_s(self) -> float | None:
        return None


class Answers:
    name = "answers"

    def idle_s(self) -> float | None:
        return 12.0


def test_the_first_source_that_answers_is_used_else_the_cpu_fallback() -> None:
    assert idle_source_select(25, [Silent(), Answers()]).name == "answers"
    fallback = idle_source_select(25, [Silent()])
    assert isinstance(fallback, CpuBusySource)
    assert "fallback" in fallback.name


BUSY = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(5)


def test_the_cpu_fallback_counts_other_programs_but_not_the_agents_own(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    # A stand-in for the agent: a process whose child spins, as a job of its would.
    spawn = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BUSY!r}])"
    agent = subprocess.Popen([sys.executable, "-c", spawn])
    processes.append(agent)
    other = subprocess.Popen([sys.executable, "-c", BUSY])
    processes.append(other)
    assert wait_for_children(agent.pid)
    (job,) = psutil.Process(agent.pid).children()
    job_before = sum(job.cpu_times()[:2])
    source = CpuBusySource(25, own_pid=agent.pid)
    time.sleep(1.5)

    used = source.others_cpu_s()

    # Both spun (as much as two shared cores allowed): only the other program counts.
    assert used[other.pid] > 0.1
    assert sum(job.cpu_times()[:2]) - job_before > 0.1
    assert job.pid not in used and agent.pid not in used


def wait_for_children(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not psutil.Process(pid).children():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_cpu_fallback_says_busy_while_a_program_spins(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    source = CpuBusySource(1)  # 1 % of the cores: one spinning process is far above
    time.sleep(0.3)
    assert source.idle_s() is not None
    processes.append(subprocess.Popen([sys.executable, "-c", BUSY]))
    time.sleep(1.0)

    assert source.idle_s() == pytest.approx(0.0, abs=0.05)
    assert source.last_busy_pct > 1


# -- the programs that pause the agent, and the pause flag -------------------------------------


def test_a_running_program_is_found_by_its_name(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    game = tmp_path / "cp-test-game"
    game.symlink_to("/bin/sleep")
    assert programs_running(("cp-test-game",)) == ()

    processes.append(subprocess.Popen([str(game), "30"]))
    time.sleep(0.2)

    assert programs_running(("CP-Test-Game.exe", "not-running")) == ("CP-Test-Game.exe",)


def test_pause_and_resume_leave_and_remove_the_flag(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert not state.paused()

    state.pause()
    assert state.paused()
    assert state.resume() is True
    assert not state.paused()
    assert state.resume() is False
