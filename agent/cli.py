"""`computepool-agent register | run | doctor | status | pause | resume | models`."""

from __future__ import annotations

import argparse
import logging
import re
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from agent.benchmarking import BenchmarkService
from agent.client import AuthError, HubClient, HubError, HubRejected, agent_version
from agent.config import (
    CONFIG_ENV_VAR,
    SANDBOX_CHOICES,
    AgentConfig,
    ConfigError,
    load_config,
    resolve_config_path,
    save_config,
)
from agent.owner import Observer, OwnerRules, StateDir
from agent.owner.caps import capabilities_capped, models_vram_cap
from agent.owner.rules import rule_names

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

UNSANDBOXED_WARNING = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
!! WARNING: --allow-unsandboxed is set.                                       !!
!! If no sandbox is available, jobs from the hub will run DIRECTLY on this    !!
!! machine, as this user, with its files and network. Use only on a machine   !!
!! you can wipe, with jobs you trust.                                         !!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"""


def configure_logging(*, verbose: bool, report: bool = False) -> None:
    """`report`: a command whose output is a report (doctor) logs errors only, so that no log
    line lands in the middle of it: what it finds, it prints as rows."""
    # Without force: a host that already set up logging (a service wrapper, pytest) keeps its own.
    quiet = logging.ERROR if report else logging.INFO
    logging.basicConfig(
        level=logging.DEBUG if verbose else quiet,
        format="%(asctime)s %(levelname)-7s %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )
    # Connection-pool chatter would drown the one-line-per-event log an operator reads.
    for noisy in ("urllib3", "docker"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _hub_url(value: str) -> str:
    """The hub's address as a URL with its scheme: requests cannot guess one, and a bare
    `host:port` would otherwise fail deep in the first request."""
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"expected the hub's URL with http:// or https://, e.g. https://hub.example.com or "
            f"http://127.0.0.1:8000, got {value!r}"
        )
    return url


def _region(value: str) -> str:
    # The shape only: the hub checks it is a real country (the agent carries no country list)
    # and registration prints its refusal.
    region = value.strip().upper()
    if not re.fullmatch(r"[A-Z]{2}", region):
        raise argparse.ArgumentTypeError(f"expected a two-letter country code, got {value!r}")
    return region


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _float(value: str, *, zero: bool) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not (number > 0 or (zero and number == 0)):  # NaN is neither
        wanted = "a number ≥ 0" if zero else "a positive number"
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {value!r}")
    return number


def _positive_float(value: str) -> float:
    return _float(value, zero=False)


def _non_negative_float(value: str) -> float:
    return _float(value, zero=True)


def _percent(value: str) -> int:
    number = _positive_int(value)
    if number > 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 1 to 100, got {value!r}")
    return number


def _owner_flags(run: argparse.ArgumentParser) -> None:
    """The owner's rules, each over its setting in the config file (docs/operators.md)."""
    from agent.owner.rules import ON_RETURN_CHOICES

    rules = run.add_argument_group("the owner's rules (default: config)")
    rules.add_argument(
        "--idle-minutes", type=_non_negative_float, metavar="N",
        help="start after N minutes without keyboard or mouse input (0: whenever)",
    )  # fmt: skip
    battery = rules.add_mutually_exclusive_group()
    battery.add_argument(
        "--run-on-battery", dest="run_on_battery", action="store_true", default=None,
        help="work on battery power too",
    )  # fmt: skip
    battery.add_argument(
        "--no-run-on-battery", dest="run_on_battery", action="store_false",
        help="take no work on battery power",
    )  # fmt: skip
    rules.add_argument(
        "--active-hours", metavar="HH:MM-HH:MM",
        help='only between these local times, e.g. 22:00-07:00 ("" for any time)',
    )  # fmt: skip
    rules.add_argument(
        "--pause-program", dest="pause_programs", action="append", metavar="NAME",
        help="pause while a program of this name runs (repeatable; replaces the config's list)",
    )  # fmt: skip
    rules.add_argument("--max-cpu-pct", type=_percent, metavar="X", help="share of the cores")
    rules.add_argument("--max-ram-gb", type=_non_negative_float, metavar="Y", help="RAM (0: all)")
    rules.add_argument(
        "--max-gpu-mem-pct", type=_percent, metavar="Z", help="share of each GPU's memory"
    )
    rules.add_argument(
        "--on-owner-return", choices=ON_RETURN_CHOICES,
        help="running work when the owner comes back: hand it back to the hub, or suspend it",
    )  # fmt: skip
    rules.add_argument(
        "--max-temp", dest="max_temp_c", type=_positive_float, metavar="C",
        help="no new work with a GPU this hot (°C)",
    )  # fmt: skip
    rules.add_argument(
        "--critical-temp", dest="critical_temp_c", type=_positive_float, metavar="C",
        help="stop running work with a GPU this hot (°C)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="computepool-agent",
        description="Run jobs from a ComputePool hub on this machine's idle GPUs and CPUs.",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"configuration file (default: ${CONFIG_ENV_VAR} or the platform's config directory)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {agent_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    register = commands.add_parser("register", help="register this machine with a hub")
    register.add_argument(
        "--hub", required=True, type=_hub_url, metavar="URL", help="the hub's URL, with http(s)://"
    )
    register.add_argument("--token", required=True, metavar="KEY", help="your operator API key")
    register.add_argument("--name", help="node name (default: the host name)")
    register.add_argument("--region", type=_region, help="two-letter country code, e.g. IN")
    register.add_argument(
        "--force", action="store_true", help="replace an existing registration with a new node"
    )

    run = commands.add_parser("run", help="claim and run jobs until stopped")
    run.add_argument("--slots", type=_positive_int, help="tasks run at once (default: config)")
    run.add_argument(
        "--sandbox", choices=SANDBOX_CHOICES, help="sandbox to use (default: config, auto)"
    )
    run.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="DANGEROUS: run jobs without isolation when no sandbox is available",
    )
    run.add_argument(
        "--drain-grace",
        type=_positive_float,
        metavar="SECONDS",
        help="on stop, how long running tasks may finish (default: config, 60)",
    )

    _owner_flags(run)

    commands.add_parser("doctor", help="check hardware, sandboxes and the hub connection")
    commands.add_parser(
        "status", help="show the owner's rules, the agent's verdict, earnings and the node's state"
    )
    commands.add_parser("pause", help="take no work until `resume` (the running agent obeys)")
    commands.add_parser("resume", help="take work again, as the owner's rules allow")
    commands.add_parser("models", help="list the models kept on this machine for inference")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(verbose=args.verbose, report=args.command == "doctor")
    path = resolve_config_path(args.config)
    handler = {
        "register": _register, "run": _run, "doctor": _doctor, "status": _status,
        "models": _models, "pause": _pause, "resume": _resume,
    }  # fmt: skip
    try:
        return handler[args.command](args, path)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _models(args: argparse.Namespace, path: Path) -> int:
    config = load_config(path)
    from agent.model_cache import ModelCache

    budget = config.models_disk_mb * 1024 * 1024
    cache = ModelCache(Path(config.models_dir), budget)
    cached = cache.cached()
    state = "on" if config.inference else "off (this machine serves no models)"
    print(f"inference: {state}")
    print(
        f"models in {cache.root}: {len(cached)}, {cache.used_bytes() / 2**20:.1f} MB "
        f"of {config.models_disk_mb} MB"
    )
    for model in reversed(cached):  # the most recently used first
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(model.last_used))
        names = ", ".join(model.names) or "?"
        print(f"  {names}  {model.size / 2**20:.1f} MB  sha256 {model.sha256}  last used {used}")
    # What is loaded lives in the running agent, which tells the hub with each heartbeat.
    client = HubClient(config.hub_url, config.agent_key)
    try:
        loaded = (client.me().get("load") or {}).get("models_loaded") or []
        print(f"loaded (the running agent's last heartbeat): {', '.join(loaded) or 'none'}")
    except HubError as exc:
        print(f"loaded: unknown (the hub did not answer: {exc})")
    finally:
        client.close()
    return EXIT_OK


def _register(args: argparse.Namespace, path: Path) -> int:
    if path.exists() and not args.force:
        print(
            f"error: this machine is already registered ({path}); pass --force to register it "
            "again as a new node",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from agent.detect import detect_capabilities

    capabilities = detect_capabilities().to_dict()
    name = args.name or socket.gethostname()
    client = HubClient(args.hub, args.token)
    try:
        registration = client.register(name=name, region=args.region, capabilities=capabilities)
    except AuthError as exc:
        print(f"error: the hub rejected the operator key ({exc})", file=sys.stderr)
        return EXIT_FAILED
    except HubError as exc:
        print(f"error: registration failed: {exc}", file=sys.stderr)
        # Which field the hub refused and why (a region that is not a country, say).
        for field_name, messages in exc.fields.items():
            print(f"  {field_name}: {'; '.join(map(str, messages))}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    config = AgentConfig(
        hub_url=args.hub,
        node_id=registration.node_id,
        agent_key=registration.agent_key,
        hub_public_key=registration.hub_public_key,
        name=str(registration.node.get("name") or name),
        region=args.region,
        heartbeat_interval_s=registration.heartbeat_interval_s,
    )
    save_config(config, path)
    node = registration.node
    print(
        f"registered node {config.node_id} ({config.name}): state {node.get('state')}, "
        f"tier {node.get('tier')}\nconfiguration written to {path}\n"
        "start taking jobs with: computepool-agent run"
    )
    return EXIT_OK


def _run(args: argparse.Namespace, path: Path) -> int:
    config = load_config(path)
    from agent.daemon import Daemon, DaemonSettings
    from agent.detect import detect_capabilities, detect_gpu_state
    from agent.runner import TaskRunner
    from agent.sandbox import SandboxUnavailable, select_sandbox
    from agent.sandbox.leftovers import leftovers_remove

    log = logging.getLogger("agent")
    rules = config.owner_rules(**{name: getattr(args, name, None) for name in rule_names()})
    if args.allow_unsandboxed:
        print(UNSANDBOXED_WARNING, file=sys.stderr)
    preference = args.sandbox or config.sandbox
    node = config.owner
    try:
        sandbox = select_sandbox(
            preference=preference,
            allowed_images=config.allowed_images,
            allow_unsandboxed=args.allow_unsandboxed,
            node=node,
            warm=config.warm_containers,
        )
    except SandboxUnavailable as exc:
        print(
            f"error: no usable sandbox ({exc}); run `computepool-agent doctor` for details",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if sandbox.name == "none":
        log.warning("RUNNING JOBS WITHOUT A SANDBOX: they have full access to this machine")
    log.info("sandbox: %s; allowed images: %s", sandbox.name, ", ".join(config.allowed_images))
    # A run killed before it could clean up left its containers and work dirs; its tasks are the
    # hub's again, so nothing of them is wanted.
    leftovers_remove(node)
    work_dir = Path(config.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    capabilities = capabilities_capped(detect_capabilities(work_dir=work_dir).to_dict(), rules)
    owner = _owner_observer(config, rules, detect_gpu_state)
    client = HubClient(config.hub_url, config.agent_key)
    settings = DaemonSettings(
        slots=args.slots or config.slots,
        heartbeat_interval_s=config.heartbeat_interval_s,
        drain_grace_s=args.drain_grace or config.drain_grace_s,
    )
    daemon = Daemon(
        inference=_inference_service(
            config,
            client,
            capabilities,
            models_vram_cap(config.models_vram_mb, capabilities, rules),
        ),
        client=client,
        runner_factory=lambda: TaskRunner(
            client=client, sandbox=sandbox, hub_public_key=config.hub_public_key
        ),
        settings=settings,
        capabilities=capabilities,
        gpu_state=detect_gpu_state,
        benchmark=BenchmarkService(
            client=client,
            hub_public_key=config.hub_public_key,
            gpu=any(gpu.get("vendor") == "nvidia" for gpu in capabilities.get("gpus") or []),
        ),
        owner=owner,
    )
    daemon.install_signal_handlers()
    try:
        return daemon.run()
    finally:
        client.close()
        sandbox.close()


def _owner_observer(config: AgentConfig, rules: OwnerRules, gpu_state) -> Observer:
    from agent.owner.idle import idle_source_select

    log = logging.getLogger("agent")
    idle = idle_source_select(rules.busy_cpu_pct)
    log.info("owner's rules: %s; idle source: %s", _rules_line(rules), idle.name)
    return Observer(
        rules=rules, idle=idle, state=StateDir(Path(config.state_dir)), gpu_state=gpu_state
    )


def _rules_line(rules: OwnerRules) -> str:
    parts = [
        f"idle {rules.idle_minutes:g} min" if rules.idle_minutes else "no idle wait",
        "on battery too" if rules.run_on_battery else "not on battery",
        f"hours {rules.active_hours}" if rules.active_hours else "any hour",
        f"pause for {', '.join(rules.pause_programs)}" if rules.pause_programs else "",
        f"≤ {rules.max_cpu_pct} % of cores",
        f"≤ {rules.max_ram_gb:g} GB RAM" if rules.max_ram_gb else "",
        f"≤ {rules.max_gpu_mem_pct} % of GPU memory",
        f"owner back: {rules.on_owner_return.replace('_', ' ')}",
        f"GPU limits {rules.max_temp_c:g}/{rules.critical_temp_c:g} °C",
    ]
    return ", ".join(part for part in parts if part)


def _inference_service(
    config: AgentConfig, client: HubClient, capabilities: dict[str, Any], vram_cap_mb: int
):
    """The model-serving side of the agent, or None where the operator opted out or no
    engine is installed. Models take at most `vram_cap_mb` of GPU memory (0: what is free)."""
    log = logging.getLogger("agent")
    if not config.inference:
        log.info("inference: off (this machine serves no models)")
        return None
    from agent.detect import detect_gpu_state
    from agent.engine.base import EngineError
    from agent.engine.llama import LlamaProcess, engine_available
    from agent.inference import InferenceService, InferenceSettings
    from agent.model_cache import ModelCache

    missing = engine_available()
    if missing is not None:
        log.warning("inference: off: %s", missing)
        return None
    on_gpu = bool(capabilities.get("gpu_count"))

    def engine_for(model: dict[str, Any]) -> LlamaProcess:
        vram = int(model.get("vram_mb") or 0)
        fits = vram > 0 and (vram_cap_mb == 0 or vram <= vram_cap_mb)
        if on_gpu and fits:
            return LlamaProcess(n_gpu_layers=-1)
        if int(model.get("ram_mb") or 0) > 0:
            return LlamaProcess(n_gpu_layers=0)
        raise EngineError(f"{model['name']} needs more VRAM than models may use here", unfit=True)

    cache = ModelCache(Path(config.models_dir), config.models_disk_mb * 1024 * 1024)
    log.info("inference: on, %d slot(s), models in %s", config.inference_slots, cache.root)
    return InferenceService(
        client=client,
        cache=cache,
        engine_factory=engine_for,
        settings=InferenceSettings(slots=config.inference_slots, vram_cap_mb=vram_cap_mb),
        free_vram_mb=lambda: _free_vram_mb(detect_gpu_state),
    )


def _free_vram_mb(gpu_state) -> int | None:
    """The free VRAM of the GPU with the most free, or None without a GPU."""
    try:
        free = [gpu.get("vram_free_mb") for gpu in gpu_state()]
    except Exception:  # a failing sensor reads as no GPU, never as a crash
        return None
    free = [mb for mb in free if isinstance(mb, int)]
    return max(free) if free else None


def _doctor(args: argparse.Namespace, path: Path) -> int:
    out = sys.stdout
    problems: list[str] = []
    config: AgentConfig | None = None
    _heading(out, "Configuration")
    try:
        config = load_config(path)
        _row(out, "file", str(path))
        _row(out, "hub", config.hub_url)
        _row(out, "node", f"{config.node_id} ({config.name or 'unnamed'})")
    except ConfigError as exc:
        _row(out, "file", f"PROBLEM: {exc}")
        problems.append("configuration")

    from agent.detect import detect_capabilities

    _heading(out, "Hardware")
    work_dir = Path(config.work_dir) if config else None
    capabilities = detect_capabilities(
        work_dir=work_dir if work_dir and work_dir.exists() else None
    ).to_dict()
    _print_hardware(out, capabilities)

    _heading(out, "Sandboxes")
    problems += _print_sandboxes(out, config)

    if config is not None:
        from agent.owner.idle import idle_source_select

        _heading(out, "Owner")
        rules = config.owner_rules()
        _row(out, "rules", _rules_line(rules))
        _row(out, "idle source", idle_source_select(rules.busy_cpu_pct).name)

    if config is not None:
        _heading(out, "Leftovers")
        _print_leftovers(out, config)

    _heading(out, "Inference")
    problems += _print_inference(out, config)

    _heading(out, "Hub")
    if config is None:
        _row(out, "hub", "not checked (no configuration)")
    else:
        problems += _print_hub(out, config)

    _heading(out, "Verdict")
    if problems:
        _row(out, "result", f"PROBLEMS: {', '.join(problems)}")
        return EXIT_FAILED
    _row(out, "result", "ok: ready to run jobs")
    return EXIT_OK


def _print_hardware(out: TextIO, capabilities: dict[str, Any]) -> None:
    cpu = capabilities.get("cpu") or {}
    flags = [flag for flag in ("avx", "avx2", "avx512") if cpu.get(flag)]
    _row(
        out,
        "cpu",
        f"{_known(cpu.get('model'))} ({_known(cpu.get('arch'))}), "
        f"{_known(cpu.get('physical_cores'))} cores / {_known(cpu.get('logical_cores'))} "
        f"threads{', ' + ' '.join(flags) if flags else ''}",
    )
    _row(out, "ram", f"{_known(capabilities.get('ram_mb'))} MB")
    _row(out, "disk free", f"{_known(capabilities.get('disk_free_mb'))} MB")
    gpus = capabilities.get("gpus") or []
    if not gpus:
        _row(out, "gpus", "none found")
    for gpu in gpus:
        _row(
            out,
            f"gpu {gpu.get('index')}",
            f"{_known(gpu.get('name'))}, {_known(gpu.get('vram_total_mb'))} MB, "
            f"compute {_known(gpu.get('compute_capability'))}, "
            f"driver {_known(gpu.get('driver_version'))} (via {gpu.get('source')})",
        )
    detection = capabilities.get("detection") or {}
    _row(out, "gpu source", str(detection.get("gpu_source")))
    for note in detection.get("notes") or []:
        _row(out, "note", str(note))


def _print_sandboxes(out: TextIO, config: AgentConfig | None) -> list[str]:
    from agent.sandbox import SandboxUnavailable, available_sandboxes, select_sandbox

    found = available_sandboxes()
    _row(out, "available", ", ".join(found) if found else "none")
    preference = config.sandbox if config else "auto"
    try:
        chosen = select_sandbox(
            preference=preference, allowed_images=config.allowed_images if config else None
        )
    except SandboxUnavailable as exc:
        _row(out, "selected", f"PROBLEM: {exc}")
        return ["sandbox"]
    _row(out, "selected", f"{chosen.name} (preference: {preference})")
    if config:
        _row(out, "allowed images", ", ".join(config.allowed_images))
    return []


def _print_leftovers(out: TextIO, config: AgentConfig) -> None:
    """What an earlier run of this node left (removed when the agent starts): not a problem."""
    from agent.sandbox.leftovers import leftovers_find

    found = leftovers_find(config.owner)
    if found.docker_unchecked is not None:
        _row(out, "containers", "not checked (no Docker engine answers)")
    else:
        _row(out, "containers", _left(found.containers, "removed when the agent starts"))
    _row(out, "work dirs", _left([str(p) for p in found.work_dirs], "removed when it starts"))


def _left(items: list[str], then: str) -> str:
    if not items:
        return "none left by an earlier run"
    return f"{len(items)} left by an earlier run, {then}: {', '.join(items)}"


def _print_hub(out: TextIO, config: AgentConfig) -> list[str]:
    client = HubClient(config.hub_url, config.agent_key)
    started = time.monotonic()
    try:
        node = client.me()
    except HubError as exc:
        _row(out, "reachable", f"PROBLEM: {exc}")
        return ["hub"]
    finally:
        client.close()
    _row(out, "reachable", f"yes ({(time.monotonic() - started) * 1000:.0f} ms)")
    _print_node(out, node)
    return []


def _print_node(out: TextIO, node: dict[str, Any]) -> None:
    _row(out, "node", f"{node.get('id')} ({node.get('name')})")
    _row(out, "state", str(node.get("state")))
    _row(out, "tier", str(node.get("tier")))
    _row(out, "reliability", str(node.get("reliability")))
    _row(out, "region", str(node.get("region")))
    if node.get("quarantine_reason"):
        _row(out, "quarantined", str(node["quarantine_reason"]))


def _status(args: argparse.Namespace, path: Path) -> int:
    config = load_config(path)
    out = sys.stdout
    _heading(out, "Local")
    _row(out, "config", str(path))
    _row(out, "hub", config.hub_url)
    _row(out, "node id", str(config.node_id))
    _row(out, "slots", str(config.slots))
    _row(out, "sandbox", config.sandbox)
    _row(out, "allowed images", ", ".join(config.allowed_images))
    _row(out, "work dir", config.work_dir)
    _print_owner(out, config)
    _heading(out, "Hub")
    client = HubClient(config.hub_url, config.agent_key)
    try:
        node = client.me()
        _print_node(out, node)
        _print_earnings(out, client)
    except HubError as exc:
        _row(out, "hub", f"unreachable or refused: {exc}")
        return EXIT_FAILED
    finally:
        client.close()
    return EXIT_OK


def _print_earnings(out: TextIO, client: HubClient) -> None:
    _heading(out, "Earnings")
    try:
        earnings = client.earnings(utc_offset_min=_utc_offset_min())
    except HubRejected as exc:  # a hub from before the endpoint: the rest of status stands
        _row(out, "earnings", f"not shown by this hub ({exc})")
        return
    _row(out, "today", str(earnings.get("today")))
    _row(out, "total", str(earnings.get("total")))
    _row(out, "to cash out", str(earnings.get("balance")))
    _row(out, "pending cashout", str(earnings.get("cashout_pending")))


def _utc_offset_min() -> int:
    """This machine's offset from UTC now, so that "today" starts at its midnight."""
    return (time.localtime().tm_gmtoff or 0) // 60


# A status file older than this was left by an agent that is no longer running.
STATUS_STALE_S = 60.0


def _print_owner(out: TextIO, config: AgentConfig) -> None:
    _heading(out, "Owner")
    _row(out, "rules", _rules_line(config.owner_rules()))
    state = StateDir(Path(config.state_dir))
    _row(out, "paused", "yes (computepool-agent resume)" if state.paused() else "no")
    status = state.read_status()
    if status is None or time.time() - status.updated_at > STATUS_STALE_S:
        _row(out, "agent", "not running")
        return
    _row(out, "agent", f"running (pid {status.pid})")
    _row(out, "idle source", status.idle_source)
    _row(out, "verdict", f"{'taking work' if status.ok else 'taking no work'}: {status.reason}")
    if status.suspended:
        _row(out, "suspended", f"{status.suspended} task(s)")


def _pause(args: argparse.Namespace, path: Path) -> int:
    config = load_config(path)
    StateDir(Path(config.state_dir)).pause()
    print(
        "paused: the agent takes no new work and "
        f"{'suspends' if config.on_owner_return == 'suspend' else 'hands back'} what runs; "
        "`computepool-agent resume` to go on"
    )
    return EXIT_OK


def _resume(args: argparse.Namespace, path: Path) -> int:
    config = load_config(path)
    was = StateDir(Path(config.state_dir)).resume()
    print("resumed: work is taken as the owner's rules allow" if was else "was not paused")
    return EXIT_OK


def _print_inference(out: TextIO, config: AgentConfig | None) -> list[str]:
    if config is not None and not config.inference:
        _row(out, "inference", "off (inference: false): this machine serves no models")
        return []
    from agent.engine.base import EngineError
    from agent.engine.llama import engine_available, engine_check

    missing = engine_available()
    if missing is not None:
        _row(out, "engine", f"not installed: {missing}; or set inference: false")
        return []
    try:
        _row(out, "engine", f"llama.cpp in its sandbox: ok ({engine_check()})")
    except EngineError as exc:
        _row(out, "engine", f"PROBLEM: {exc}")
        return ["inference engine"]
    if config is not None:
        vram = f"{config.models_vram_mb} MB" if config.models_vram_mb else "whatever is free"
        disk = f"up to {config.models_disk_mb} MB on disk"
        slots = f"{config.inference_slots} request(s) at once"
        _row(out, "models", f"{config.models_dir}, {disk}, {vram} of VRAM, {slots}")
    return []


def _heading(out: TextIO, title: str) -> None:
    print(f"\n{title}", file=out)


def _row(out: TextIO, label: str, value: str) -> None:
    print(f"  {label + ':':<16}{value}", file=out)


def _known(value: object) -> str:
    return "unknown" if value is None else str(value)
