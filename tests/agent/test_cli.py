"""`computepool-agent` commands, in process against the stub hub, and one real agent process."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cli import build_parser, main
from agent.config import CONFIG_ENV_VAR, AgentConfig, load_config, save_config
from agent.owner import OwnerStatus, StateDir
from agent.sandbox import available_sandboxes
from tests.agent.test_client import HubKeys, HubStub, claim_payload, free_port, hub

__all__ = ["hub"]

REPO = Path(__file__).resolve().parents[2]
NODE = {
    "id": 9,
    "name": "rig-9",
    "state": "online",
    "tier": "rtx-4090",
    "reliability": 0.42,
    "region": "IN",
    "capabilities": {},
    "quarantine_reason": None,
}
needs_bwrap = pytest.mark.skipif(
    "bwrap" not in available_sandboxes(), reason="bubblewrap is not usable here"
)


def write_config(path: Path, hub_url: str, **overrides: object) -> AgentConfig:
    values: dict[str, object] = {
        "hub_url": hub_url,
        "node_id": 9,
        "agent_key": "agent-key",
        "hub_public_key": HubKeys().public_b64,
    }
    config = AgentConfig(**(values | overrides))  # type: ignore[arg-type]
    save_config(config, path)
    return config


# -- arguments ---------------------------------------------------------------------------------


def test_it_parses_each_command() -> None:
    parser = build_parser()

    register = parser.parse_args(
        ["register", "--hub", "https://hub", "--token", "k", "--region", "in", "--name", "rig"]
    )
    run = parser.parse_args(
        [
            "--config",
            "/tmp/a.json",
            "run",
            "--slots",
            "2",
            "--sandbox",
            "bwrap",
            "--allow-unsandboxed",
        ]
    )

    assert (register.hub, register.token, register.region, register.name) == (
        "https://hub",
        "k",
        "IN",
        "rig",
    )
    assert (run.config, run.slots, run.sandbox, run.allow_unsandboxed) == (
        "/tmp/a.json",
        2,
        "bwrap",
        True,
    )
    assert parser.parse_args(["doctor"]).command == "doctor"
    assert parser.parse_args(["status"]).command == "status"


def test_the_owners_rules_have_flags() -> None:
    args = build_parser().parse_args(
        ["run", "--idle-minutes", "10", "--no-run-on-battery", "--active-hours", "22:00-07:00",
         "--pause-program", "steam", "--pause-program", "game.exe", "--max-cpu-pct", "50",
         "--max-ram-gb", "8", "--max-gpu-mem-pct", "75", "--on-owner-return", "suspend",
         "--max-temp", "80", "--critical-temp", "90"]
    )  # fmt: skip

    assert (args.idle_minutes, args.run_on_battery, args.active_hours) == (10, False, "22:00-07:00")
    assert args.pause_programs == ["steam", "game.exe"]
    assert (args.max_cpu_pct, args.max_ram_gb, args.max_gpu_mem_pct) == (50, 8, 75)
    assert (args.on_owner_return, args.max_temp_c, args.critical_temp_c) == ("suspend", 80, 90)
    assert build_parser().parse_args(["run"]).run_on_battery is None
    assert build_parser().parse_args(["pause"]).command == "pause"
    assert build_parser().parse_args(["resume"]).command == "resume"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "required"),
        (["register", "--hub", "https://hub"], "--token"),
        (["register", "--hub", "https://h", "--token", "t", "--region", "india"], "two-letter"),
        (["register", "--hub", "hub.example.com", "--token", "t"], "http:// or https://"),
        (["run", "--slots", "0"], "positive integer"),
        (["run", "--sandbox", "chroot"], "invalid choice"),
        (["run", "--drain-grace", "-5"], "positive number"),
        (["run", "--max-cpu-pct", "0"], "positive integer"),
        (["run", "--max-gpu-mem-pct", "101"], "from 1 to 100"),
        (["run", "--idle-minutes", "-1"], "number ≥ 0"),
        (["run", "--on-owner-return", "ignore"], "invalid choice"),
        (["run", "--run-on-battery", "--no-run-on-battery"], "not allowed with"),
    ],
)
def test_it_rejects_bad_arguments(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)

    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err


def test_it_explains_a_missing_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(tmp_path / "none.json"), "status"]) == 2
    assert "register this machine first" in capsys.readouterr().err


def test_it_explains_a_corrupt_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "agent.json"
    path.write_text("{not json")

    assert main(["--config", str(path), "run"]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


# -- register ----------------------------------------------------------------------------------


def registration_route(hub: HubStub) -> None:
    hub.routes["POST", "/api/v1/nodes/"] = (
        201,
        {
            "node": NODE,
            "agent_key": "fresh-agent-key",
            "hub_public_key": "cHVibGljLWtleQ==",
            "heartbeat_interval_s": 10,
        },
    )


def test_it_registers_and_keeps_the_key_in_a_private_file(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registration_route(hub)
    path = tmp_path / "conf" / "agent.json"

    argv = ["--config", str(path), "register", "--hub", hub.url, "--token", "operator-key"]

    code = main([*argv, "--name", "rig-9", "--region", "in"])

    assert code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path)
    assert (config.node_id, config.agent_key, config.region) == (9, "fresh-agent-key", "IN")
    assert (config.hub_url, config.hub_public_key) == (hub.url, "cHVibGljLWtleQ==")
    assert config.heartbeat_interval_s == 10
    request = hub.received("/nodes/")[0]
    assert request.headers["Authorization"] == "Bearer operator-key"
    body = request.json()
    assert (body["name"], body["region"]) == ("rig-9", "IN")
    assert {"gpus", "cpu", "ram_mb", "sandboxes"} <= set(body["capabilities"])
    assert "registered node 9" in capsys.readouterr().out


def test_it_says_which_field_the_hub_refused(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = "'XX' is not a country: give an ISO 3166-1 alpha-2 code such as IN, US or DE."
    hub.routes["POST", "/api/v1/nodes/"] = (
        400,
        {"error": "invalid", "detail": "Invalid input.", "fields": {"region": [refusal]}},
    )
    path = tmp_path / "agent.json"
    argv = ["--config", str(path), "register", "--hub", hub.url, "--token", "k"]

    assert main([*argv, "--region", "xx"]) == 1
    assert f"region: {refusal}" in capsys.readouterr().err
    assert not path.exists()


def test_it_refuses_to_register_twice_without_force(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registration_route(hub)
    path = tmp_path / "agent.json"
    write_config(path, hub.url)
    argv = ["--config", str(path), "register", "--hub", hub.url, "--token", "k"]

    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err
    assert hub.requests == []
    assert main([*argv, "--force"]) == 0
    assert load_config(path).agent_key == "fresh-agent-key"


def test_it_reports_a_rejected_operator_key(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.routes["POST", "/api/v1/nodes/"] = (401, {"error": "not_authenticated"})
    path = tmp_path / "agent.json"

    assert main(["--config", str(path), "register", "--hub", hub.url, "--token", "bad"]) == 1
    assert "rejected the operator key" in capsys.readouterr().err
    assert not path.exists()


# -- status and doctor -------------------------------------------------------------------------


EARNINGS = {
    "since": "2025-01-01T00:00:00Z",
    "today": "12.50",
    "total": "340.00",
    "balance": "90.00",
    "cashout_pending": "250.00",
}
# "Today" starts at this machine's midnight: the agent says how far east of UTC it is.
EARNINGS_PATH = f"/api/v1/agent/earnings?utc_offset_min={time.localtime().tm_gmtoff // 60}"


def test_it_shows_the_node_on_the_hub_and_the_local_config(
    hub: HubStub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub.routes["GET", "/api/v1/agent/me"] = (200, NODE | {"state": "quarantined"})
    hub.routes["GET", EARNINGS_PATH] = (200, EARNINGS)
    path = tmp_path / "agent.json"
    write_config(path, hub.url, slots=3)
    monkeypatch.setenv(CONFIG_ENV_VAR, str(path))

    assert main(["status"]) == 0

    out = capsys.readouterr().out
    assert "quarantined" in out
    assert "rtx-4090" in out
    assert "slots:          3" in out
    assert "computepool/*" in out
    assert "agent-key" not in out
    assert "today:          12.50" in out
    assert "total:          340.00" in out
    assert "pending cashout:250.00" in out
    assert "agent:          not running" in out


def status_config(hub: HubStub, tmp_path: Path, **overrides: object) -> tuple[Path, StateDir]:
    """A registered agent whose hub answers `status`, and its state directory."""
    hub.routes["GET", "/api/v1/agent/me"] = (200, NODE)
    hub.routes["GET", EARNINGS_PATH] = (200, EARNINGS)
    path = tmp_path / "agent.json"
    config = write_config(path, hub.url, state_dir=str(tmp_path / "state"), **overrides)
    return path, StateDir(Path(config.state_dir))


def test_pause_and_resume_reach_the_running_agent_through_the_state_dir(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, state = status_config(hub, tmp_path, idle_minutes=5)

    assert main(["--config", str(path), "pause"]) == 0
    assert "paused" in capsys.readouterr().out
    assert state.paused()
    assert main(["--config", str(path), "status"]) == 0
    out = capsys.readouterr().out
    assert "paused:         yes" in out
    assert "idle 5 min" in out

    assert main(["--config", str(path), "resume"]) == 0
    assert not state.paused()
    assert main(["--config", str(path), "resume"]) == 0
    assert "was not paused" in capsys.readouterr().out


def test_status_stands_on_a_hub_that_does_not_show_earnings(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = status_config(hub, tmp_path)
    hub.routes["GET", EARNINGS_PATH] = (404, {"error": "not_found"})

    assert main(["--config", str(path), "status"]) == 0

    out = capsys.readouterr().out
    assert "tier:           rtx-4090" in out
    assert "earnings:       not shown by this hub" in out


def test_status_shows_the_running_agents_verdict(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, state = status_config(hub, tmp_path)
    state.write_status(
        OwnerStatus(
            ok=False, reason="steam running", idle_source="X11 (xprintidle)", suspended=1,
            updated_at=time.time(), pid=4242,
        )
    )  # fmt: skip

    assert main(["--config", str(path), "status"]) == 0

    out = capsys.readouterr().out
    assert "agent:          running (pid 4242)" in out
    assert "verdict:        taking no work: steam running" in out
    assert "idle source:    X11 (xprintidle)" in out
    assert "suspended:      1 task(s)" in out


def test_it_says_when_the_hub_cannot_be_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.json"
    write_config(path, f"http://127.0.0.1:{free_port()}")

    assert main(["--config", str(path), "status"]) == 1
    assert "cannot connect" in capsys.readouterr().out


@needs_bwrap
def test_doctor_reports_hardware_sandbox_hub_and_tier(
    hub: HubStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.routes["GET", "/api/v1/agent/me"] = (200, NODE)
    path = tmp_path / "agent.json"
    write_config(path, hub.url, sandbox="bwrap", work_dir=str(tmp_path))

    code = main(["--config", str(path), "doctor"])

    out = capsys.readouterr().out
    assert code == 0, out
    for expected in ("Hardware", "cpu:", "gpu source:", "selected:       bwrap", "reachable:"):
        assert expected in out
    assert "tier:           rtx-4090" in out
    assert "idle source:" in out
    assert "ok: ready to run jobs" in out


def test_doctor_lists_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--config", str(tmp_path / "absent.json"), "doctor"])

    out = capsys.readouterr().out
    assert code == 1
    assert "register this machine first" in out
    assert "not checked (no configuration)" in out
    assert "PROBLEMS: configuration" in out


def test_python_dash_m_agent_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert done.returncode == 0
    for command in ("register", "run", "doctor", "status"):
        assert command in done.stdout


# -- a real agent ------------------------------------------------------------------------------


@needs_bwrap
def test_a_real_agent_runs_a_task_in_bubblewrap_and_drains_on_sigterm(
    hub: HubStub, tmp_path: Path
) -> None:
    keys = HubKeys()
    hub.heartbeat_reply["poll_interval_s"] = 0.2
    command = [
        "sh",
        "-c",
        "sleep 1; echo task $CP_TASK_ID of $CP_SLICE_COUNT > /out/r.txt; echo ok",
    ]
    hub.claims.append(claim_payload(keys, command=command))
    path = tmp_path / "agent.json"
    write_config(path, hub.url, hub_public_key=keys.public_b64, sandbox="bwrap")
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "--config", str(path), "run", "--allow-unsandboxed"],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert hub.wait_for(lambda: bool(hub.received("/progress")), timeout=15)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)

    assert process.returncode == 0, stderr
    assert "WARNING: --allow-unsandboxed" in stderr
    assert "sandbox: bwrap" in stderr
    (upload,) = [r.form() for r in hub.received("/artifacts")]
    assert upload["file"] == b"task 12 of 4\n"
    complete = json.loads(hub.received("/complete")[0].body)
    assert complete["stdout_tail"] == "ok\n"
    final = hub.requests[-1]
    assert final.path.endswith("/heartbeat")
    assert final.json()["status"] == "draining"


# -- models ------------------------------------------------------------------------------------


def test_it_lists_the_models_kept_for_inference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib
    import os

    from agent.model_cache import ModelCache

    models = tmp_path / "models"
    path = tmp_path / "agent.json"
    write_config(path, "http://127.0.0.1:9", models_dir=str(models), models_disk_mb=64)
    data = b"GGUF" * 1000
    sha = hashlib.sha256(data).hexdigest()

    class Hub:  # serves one file, as the hub's model endpoint does (tested against the hub)
        def model_download(self, name: str, dest, *, offset: int = 0) -> str:
            dest.write(data[offset:])
            return sha

    cache = ModelCache(models, 64 * 2**20)
    cache.ensure("org/tiny:q4", Hub())
    cache.ensure("tiny-alias", Hub(), sha256=sha)
    os.utime(cache.root / f"{sha}.gguf", (0, 0))

    assert main(["--config", str(path), "models"]) == 0

    out = capsys.readouterr().out
    assert "inference: on" in out
    assert "models in " in out and "1, 0.0 MB of 64 MB" in out
    assert f"org/tiny:q4, tiny-alias  0.0 MB  sha256 {sha}" in out
    assert "loaded: unknown (the hub did not answer" in out  # nothing listens on port 9
    write_config(path, "http://127.0.0.1:9", models_dir=str(models), inference=False)
    assert main(["--config", str(path), "models"]) == 0
    assert "inference: off" in capsys.readouterr().out


def test_an_operator_can_opt_out_of_inference(tmp_path: Path) -> None:
    from agent.cli import _inference_service
    from agent.client import HubClient
    from agent.config import AgentConfig
    from agent.inference import InferenceService

    def config(**settings):
        return AgentConfig(hub_url="http://127.0.0.1:9", node_id=1, agent_key="k",
                           hub_public_key="p", models_dir=str(tmp_path), **settings)  # fmt: skip

    client = HubClient("http://127.0.0.1:9", "k")
    assert _inference_service(config(inference=False), client, {}, 0) is None
    served = _inference_service(config(inference_slots=3), client, {}, 2048)
    assert isinstance(served, InferenceService) and served.state()["slots"] == 3


def test_a_hub_address_without_its_scheme_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--config", str(tmp_path / "a.json"), "register", "--token", "k"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--hub", "127.0.0.1:8791"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "http:// or https://" in err and "Traceback" not in err
    assert not (tmp_path / "a.json").exists()


def test_doctor_prints_its_report_with_no_log_line_inside(tmp_path: Path) -> None:
    # As an operator runs it, stdout and stderr on one terminal: every line is the report's.
    done = subprocess.run(
        [sys.executable, "-m", "agent", "--config", str(tmp_path / "absent.json"), "doctor"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    assert "PROBLEMS: configuration" in done.stdout
    logged = [line for line in done.stdout.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:", line)]
    assert logged == []
