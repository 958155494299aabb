"""What an agent that was killed (SIGKILL, a crash, a power cut) left behind: containers, running
or exited, and work dirs. Each carries its node's name (the container's `computepool.node` label,
the work dir's prefix), so a restarted agent finds its own and never touches anything else on
the machine: another node's agent beside it, or containers that are not ours."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agent.sandbox.base import SandboxUnavailable, remove_tree
from agent.sandbox.docker_sandbox import ENGINE_ERRORS, NODE_LABEL, connect_docker
from agent.sandbox.workspace import workspace_prefix

log = logging.getLogger(__name__)


@dataclass
class Leftovers:
    containers: list[str] = field(default_factory=list)  # short ids
    work_dirs: list[Path] = field(default_factory=list)
    # Why containers were not looked for (no engine answers), if they were not.
    docker_unchecked: str | None = None

    def __bool__(self) -> bool:
        return bool(self.containers or self.work_dirs)


def leftovers_find(node: str) -> Leftovers:
    found = Leftovers(work_dirs=_work_dirs(node))
    try:
        client = connect_docker(timeout_s=10)
    except SandboxUnavailable as exc:
        found.docker_unchecked = str(exc)
        return found
    try:
        found.containers = [c.short_id for c in _containers(client, node)]
    except ENGINE_ERRORS as exc:
        found.docker_unchecked = str(exc)
    finally:
        client.close()
    return found


def leftovers_remove(node: str) -> Leftovers:
    """Remove the node's containers (running ones too: the hub has taken their tasks back) and
    work dirs. Call before the agent claims anything: a running agent's own are not spared.
    Returns what was removed."""
    removed = Leftovers()
    try:
        client = connect_docker(timeout_s=10)
    except SandboxUnavailable as exc:
        removed.docker_unchecked = str(exc)
    else:
        try:
            for container in _containers(client, node):
                if container.status == "paused":
                    # A warm container frozen after its job: gVisor removes none while paused.
                    container.unpause()
                container.remove(force=True)
                removed.containers.append(container.short_id)
        except ENGINE_ERRORS as exc:
            log.warning("could not remove the containers an earlier run left: %s", exc)
        finally:
            client.close()
    for path in _work_dirs(node):
        remove_tree(path)
        removed.work_dirs.append(path)
    if removed:
        log.info(
            "removed what an earlier run of this node left: %d container(s), %d work dir(s)",
            len(removed.containers),
            len(removed.work_dirs),
        )
    return removed


def _containers(client, node: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{NODE_LABEL}={node}"})


def _work_dirs(node: str) -> list[Path]:
    prefix = workspace_prefix(node)
    root = Path(tempfile.gettempdir())
    return sorted(
        path for path in root.glob(f"{prefix}*") if path.is_dir() and not path.is_symlink()
    )
