import json
import stat
from pathlib import Path

import pytest

from agent.config import (
    CONFIG_ENV_VAR,
    AgentConfig,
    ConfigError,
    default_config_path,
    load_config,
    resolve_config_path,
    save_config,
)


def make_config(**overrides: object) -> AgentConfig:
    values: dict[str, object] = {
        "hub_url": "https://hub.example.org/",
        "node_id": 7,
        "agent_key": "agent-key-secret",
        "hub_public_key": "bG9uZy1wdWJsaWMta2V5",
    }
    values.update(overrides)
    return AgentConfig(**values)  # type: ignore[arg-type]


def test_it_round_trips_through_the_file(tmp_path: Path) -> None:
    config = make_config(name="rig-1", region="IN", slots=2, sandbox="bwrap")
    path = tmp_path / "nested" / "agent.json"

    save_config(config, path)

    assert load_config(path) == config
    assert config.hub_url == "https://hub.example.org"


def test_it_has_safe_defaults() -> None:
    config = make_config()

    assert config.allowed_images == ["computepool/*"]
    assert config.slots == 1
    assert config.sandbox == "auto"
    assert config.warm_containers == 1
    assert config.drain_grace_s == 60.0
    assert config.work_dir


def test_it_writes_the_file_readable_by_the_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text("{}")
    path.chmod(0o644)

    save_config(make_config(), path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["agent.json"]


def test_it_explains_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="register this machine first"):
        load_config(tmp_path / "absent.json")


def test_it_explains_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text('{"hub_url": "https://hub", "node_id": ')

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    assert str(path) in str(caught.value)
    assert "not valid JSON (line 1" in str(caught.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"slots": 0}, "slots must be a positive integer"),
        ({"sandbox": "chroot"}, "sandbox must be one of"),
        ({"hub_url": "hub.example.org"}, "hub_url must start with"),
        ({"node_id": "7"}, "node_id must be an integer"),
        ({"allowed_images": "computepool/*"}, "allowed_images must be a list"),
        ({"drain_grace_s": -1}, "drain_grace_s must be a positive number"),
        ({"inference": "no"}, "inference must be true or false"),
        ({"models_disk_mb": 0}, "models_disk_mb must be a positive integer"),
        ({"models_disk_mb": 1.5}, "models_disk_mb must be a positive integer"),
        ({"warm_containers": -1}, "warm_containers must be an integer ≥ 0"),
        ({"warm_containers": True}, "warm_containers must be an integer ≥ 0"),
        ({"colour": "blue"}, "unknown setting"),
    ],
)
def test_it_names_the_bad_setting(tmp_path: Path, change: dict, message: str) -> None:
    data = make_config().to_dict() | change
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(data))

    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_it_names_missing_settings(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"hub_url": "https://hub"}))

    with pytest.raises(ConfigError, match=r"missing setting.*node_id.*agent_key"):
        load_config(path)


def test_it_rejects_a_file_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text("[]")

    with pytest.raises(ConfigError, match="must hold a JSON object"):
        load_config(path)


def test_it_resolves_the_path_flag_then_environment_then_platform_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFIG_ENV_VAR, raising=False)
    assert resolve_config_path(None) == default_config_path()
    assert default_config_path().parts[-2:] == ("computepool", "agent.json")

    monkeypatch.setenv(CONFIG_ENV_VAR, str(tmp_path / "env.json"))
    assert resolve_config_path(None) == tmp_path / "env.json"
    assert resolve_config_path(tmp_path / "flag.json") == tmp_path / "flag.json"
