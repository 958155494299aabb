"""The agent's configuration file: where it lives, what it holds, how it is written."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from agent.owner.rules import OwnerRules

APP_NAME = "computepool"
CONFIG_ENV_VAR = "COMPUTEPOOL_AGENT_CONFIG"
DEFAULT_ALLOWED_IMAGES = ("computepool/*",)
SANDBOX_CHOICES = ("auto", "docker", "gvisor", "bwrap")


class ConfigError(Exception):
    """The configuration file is missing, unreadable or holds a bad value."""


def default_work_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME)) / "work"


def default_state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME))


def default_models_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME)) / "models"


def owner_name(hub_url: str, node_id: int) -> str:
    """`AgentConfig.owner` for a hub and a node: the node id, then a short digest of the hub."""
    return f"{node_id}-{hashlib.sha256(hub_url.rstrip('/').encode()).hexdigest()[:8]}"


@dataclass
class AgentConfig:
    hub_url: str
    node_id: int
    agent_key: str
    hub_public_key: str
    name: str = ""
    region: str | None = None
    allowed_images: list[str] = field(default_factory=lambda: list(DEFAULT_ALLOWED_IMAGES))
    slots: int = 1
    sandbox: str = "auto"
    # Containers kept started ahead of their jobs, per shape of job in use (Docker and gVisor
    # only; 0: none, every job starts its own).
    warm_containers: int = 1
    work_dir: str = field(default_factory=lambda: str(default_work_dir()))
    heartbeat_interval_s: float = 15.0
    drain_grace_s: float = 60.0
    # Inference: whether this machine serves models at all, where their files are kept, and
    # how much disk they may take (the least recently used go first).
    inference: bool = True
    models_dir: str = field(default_factory=lambda: str(default_models_dir()))
    models_disk_mb: int = 20480
    # How many requests it serves at once, and the GPU memory models may take (0: no cap; a
    # model that needs more runs on the CPU where the catalog allows it, else is refused).
    inference_slots: int = 1
    models_vram_mb: int = 0
    # Where `pause` leaves its flag and the running agent its verdict: the owner's commands and
    # the agent must both be able to write it.
    state_dir: str = field(default_factory=lambda: str(default_state_dir()))
    # The owner's rules (agent.owner.rules.OwnerRules, where each is explained and checked).
    idle_minutes: float = OwnerRules.idle_minutes
    run_on_battery: bool = OwnerRules.run_on_battery
    active_hours: str = OwnerRules.active_hours
    pause_programs: list[str] = field(default_factory=list)
    max_cpu_pct: int = OwnerRules.max_cpu_pct
    max_ram_gb: float = OwnerRules.max_ram_gb
    max_gpu_mem_pct: int = OwnerRules.max_gpu_mem_pct
    on_owner_return: str = OwnerRules.on_owner_return
    suspend_max_s: float = OwnerRules.suspend_max_s
    busy_cpu_pct: float = OwnerRules.busy_cpu_pct
    max_temp_c: float = OwnerRules.max_temp_c
    critical_temp_c: float = OwnerRules.critical_temp_c

    def __post_init__(self) -> None:
        self.hub_url = self.hub_url.rstrip("/")
        problems = self._problems()
        if problems:
            raise ConfigError("; ".join(problems))

    @property
    def owner(self) -> str:
        """This node on this hub, as the containers and work dirs it makes are named (and found
        again after a crash): the node id alone is not enough, since every hub has a node 9 and
        two agents of two hubs may share a machine (and its Docker engine)."""
        return owner_name(self.hub_url, self.node_id)

    def owner_rules(self, **overrides: Any) -> OwnerRules:
        """The owner's rules of this file, with the flags of `run` over them; checked."""
        values = self.to_dict() | {k: v for k, v in overrides.items() if v is not None}
        if not isinstance(values["pause_programs"], list | tuple):
            raise ConfigError("pause_programs must be a list of program names")
        rules = OwnerRules.from_values(values)
        problems = rules.problems()
        if problems:
            raise ConfigError("; ".join(problems))
        return rules

    def _problems(self) -> list[str]:
        problems = []
        if not self.hub_url.startswith(("http://", "https://")):
            problems.append(f"hub_url must start with http:// or https:// (got {self.hub_url!r})")
        if not isinstance(self.node_id, int) or isinstance(self.node_id, bool):
            problems.append(f"node_id must be an integer (got {self.node_id!r})")
        if not isinstance(self.agent_key, str) or not self.agent_key:
            problems.append("agent_key is empty")
        if not isinstance(self.hub_public_key, str) or not self.hub_public_key:
            problems.append("hub_public_key is empty")
        if not isinstance(self.allowed_images, list) or not all(
            isinstance(pattern, str) for pattern in self.allowed_images
        ):
            problems.append("allowed_images must be a list of image patterns")
        if not isinstance(self.slots, int) or isinstance(self.slots, bool) or self.slots < 1:
            problems.append(f"slots must be a positive integer (got {self.slots!r})")
        if self.sandbox not in SANDBOX_CHOICES:
            problems.append(f"sandbox must be one of {', '.join(SANDBOX_CHOICES)}")
        if not isinstance(self.inference, bool):
            problems.append(f"inference must be true or false (got {self.inference!r})")
        if (
            not isinstance(self.models_disk_mb, int)
            or isinstance(self.models_disk_mb, bool)
            or self.models_disk_mb < 1
        ):
            problems.append(
                f"models_disk_mb must be a positive integer (got {self.models_disk_mb!r})"
            )
        for name, low in (("inference_slots", 1), ("models_vram_mb", 0), ("warm_containers", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                problems.append(f"{name} must be an integer ≥ {low} (got {value!r})")
        for name in ("heartbeat_interval_s", "drain_grace_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive number (got {value!r})")
        try:
            self.owner_rules()
        except ConfigError as exc:
            problems.append(str(exc))
        return problems

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
        required = ("hub_url", "node_id", "agent_key", "hub_public_key")
        missing = [name for name in required if name not in data]
        if missing:
            raise ConfigError(f"missing setting(s): {', '.join(missing)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "agent.json"


def resolve_config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--config` wins over the environment, which wins over the platform's config directory."""
    if explicit:
        return Path(explicit).expanduser()
    from_env = os.environ.get(CONFIG_ENV_VAR)
    if from_env:
        return Path(from_env).expanduser()
    return default_config_path()


def load_config(path: Path) -> AgentConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"no agent configuration at {path}: register this machine first with "
            "`computepool-agent register --hub URL --token KEY`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the agent configuration {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"the agent configuration {path} is not valid JSON (line {exc.lineno}, column "
            f"{exc.colno}: {exc.msg}); fix it or register again with --force"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"the agent configuration {path} must hold a JSON object")
    try:
        return AgentConfig.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"the agent configuration {path} is invalid: {exc}") from exc


def save_config(config: AgentConfig, path: Path) -> None:
    """Write atomically with mode 0600: the file holds the agent key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n"
    # mkstemp creates the file 0600 from the start, so the key is never briefly world-readable.
    fd, tmp_name = tempfile.mkstemp(prefix=".agent-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o600)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
