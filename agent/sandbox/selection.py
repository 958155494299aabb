"""Choosing the strongest isolation this machine offers, or the one the operator named."""

from __future__ import annotations

import logging

from agent.sandbox.base import Sandbox, SandboxUnavailable
from agent.sandbox.bwrap_sandbox import BwrapSandbox, probe_bwrap
from agent.sandbox.docker_sandbox import RUNSC, DockerSandbox, connect_docker, has_runtime
from agent.sandbox.images import ImagePolicy
from agent.sandbox.unsandboxed import UnsandboxedRunner

log = logging.getLogger(__name__)

PREFERENCES = ("auto", "gvisor", "docker", "bwrap", "none")
# Strongest first: gVisor puts a second kernel between the job and the host.
AUTO_ORDER = ("gvisor", "docker", "bwrap")


def _build(name: str, policy: ImagePolicy, node: str | None, warm: int) -> Sandbox:
    if name == "bwrap":
        probe_bwrap()
        return BwrapSandbox(policy=policy, node=node)
    client = connect_docker()
    if name == "gvisor":
        if not has_runtime(client, RUNSC):
            raise SandboxUnavailable(
                "the Docker engine has no 'runsc' runtime (install gVisor and register it "
                "with --network=none; scripts/ensure_docker.sh does both on Debian)"
            )
        return DockerSandbox(client, policy=policy, runtime=RUNSC, node=node, warm=warm)
    return DockerSandbox(client, policy=policy, node=node, warm=warm)


def select_sandbox(
    *,
    preference: str = "auto",
    allowed_images: list[str] | None = None,
    allow_unsandboxed: bool = False,
    node: str | None = None,
    warm: int = 0,
) -> Sandbox:
    """The sandbox named by `preference`, or for "auto" the strongest one that works here.
    No sandbox ("none", or "auto" with nothing available) only with `allow_unsandboxed`.
    `node` names this node on the containers and work dirs the sandbox makes; `warm` is how
    many containers of each shape in use Docker keeps started ahead of their jobs."""
    if preference not in PREFERENCES:
        raise SandboxUnavailable(
            f"unknown sandbox {preference!r}; choose one of {', '.join(PREFERENCES)}"
        )
    try:
        policy = ImagePolicy.from_list(allowed_images)
    except ValueError as exc:
        raise SandboxUnavailable(str(exc)) from exc
    if preference == "none":
        if not allow_unsandboxed:
            raise SandboxUnavailable(
                "sandbox 'none' runs jobs unisolated: it needs allow_unsandboxed"
            )
        return _unsandboxed(policy, node)

    reasons = []
    for name in AUTO_ORDER if preference == "auto" else (preference,):
        try:
            sandbox = _build(name, policy, node, warm)
        except SandboxUnavailable as exc:
            reasons.append(f"{name}: {exc}")
            continue
        if reasons:
            log.info("sandbox %s chosen; unavailable: %s", name, "; ".join(reasons))
        return sandbox
    if preference == "auto" and allow_unsandboxed:
        log.warning("no sandbox works here (%s)", "; ".join(reasons))
        return _unsandboxed(policy, node)
    hint = "" if preference != "auto" else "; allow_unsandboxed runs jobs with no isolation"
    raise SandboxUnavailable("no usable sandbox: " + "; ".join(reasons) + hint)


def _unsandboxed(policy: ImagePolicy, node: str | None) -> Sandbox:
    log.warning(
        "JOBS WILL RUN WITHOUT A SANDBOX: any job from the hub can read, change or send "
        "anything this user can"
    )
    return UnsandboxedRunner(policy=policy, node=node)


def available_sandboxes() -> list[str]:
    """What works on this machine now, strongest first; "none" always can."""
    found = []
    try:
        client = connect_docker()
    except SandboxUnavailable:
        pass
    else:
        if has_runtime(client, RUNSC):
            found.append("gvisor")
        found.append("docker")
        client.close()
    try:
        probe_bwrap()
    except SandboxUnavailable:
        pass
    else:
        found.append("bwrap")
    return [*found, "none"]
