"""Heartbeats and the reaper: the two writers of a node's liveness.

A heartbeat in the common case (state unchanged) is one UPDATE with no event: heartbeats are not
events. A heartbeat that moves the state (back online, draining) and the reaper's moves (degraded,
offline) are compare-and-set with their events in the same transaction.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.sql import commits_alone, statement
from nodes import metrics
from nodes.errors import NodeStateConflict
from nodes.hooks import heartbeat_contributions, notify_offline
from nodes.models import LIVE_STATES, Node, NodeState
from nodes.services.cas import (
    append_node_events,
    cas_update,
    transition_due_logged,
)
from nodes.services.lifecycle import node_capabilities_update
from nodes.services.quarantine import Rule, node_quarantine

REAPER = "system:reaper"
# Nodes moved per transaction by the reaper: short transactions, and a bounded list
# of ids for the offline hook.
REAP_BATCH = 10_000
_MISSED = "missed_heartbeats"
_CAS_ATTEMPTS = 5

# The state an agent's reported status asks for.
_STATUS_TARGET = {
    "available": NodeState.ONLINE,
    "busy": NodeState.ONLINE,
    "degraded": NodeState.DEGRADED,
    "draining": NodeState.DRAINING,
}
_REASON = {
    NodeState.ONLINE: "heartbeat",
    NodeState.DEGRADED: "agent_reported_degraded",
    NodeState.DRAINING: "agent_draining",
}
# A heartbeat changes liveness data only: these states are left by an admin or never.
_FROZEN = (NodeState.QUARANTINED, NodeState.RETIRED)


@dataclass(frozen=True)
class HeartbeatReply:
    poll_interval_s: int
    drain: bool
    leases: dict[str, str]
    cancel: list[str]
    state: str
    benchmark: bool = False


def deadlines(now: datetime) -> tuple[datetime, datetime]:
    interval = settings.NODE_HEARTBEAT_INTERVAL_S
    grace = timedelta(seconds=settings.NODE_HEARTBEAT_GRACE_S)
    return (
        now + timedelta(seconds=interval * settings.NODE_DEGRADED_AFTER_MISSED) + grace,
        now + timedelta(seconds=interval * settings.NODE_OFFLINE_AFTER_MISSED) + grace,
    )


def node_heartbeat(
    *,
    node: Node,
    status: str,
    load: dict[str, Any],
    gpus: list[dict[str, Any]],
    lease_tokens: list[str],
    capabilities: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> HeartbeatReply:
    now = now or timezone.now()
    if capabilities is not None:
        node_capabilities_update(node=node, capabilities=capabilities, actor=node.actor)
    for _ in range(_CAS_ATTEMPTS):
        if _beat(node, status=status, load=load, gpus=gpus, now=now):
            break
        # The reaper (or an admin) moved the node between authentication and this write.
        fresh = Node.objects.values("state", "throttled", "thermal_events", "paused_at").get(
            pk=node.pk
        )
        for name, value in fresh.items():
            setattr(node, name, value)
    else:
        raise NodeStateConflict(f"node {node.pk} kept changing state; try again")
    leases, cancel = heartbeat_contributions(node, lease_tokens)
    return HeartbeatReply(
        poll_interval_s=settings.NODE_HEARTBEAT_INTERVAL_S,
        # A quarantined node keeps beating (so its operator sees it alive) but claims nothing;
        # a paused one finishes what it runs and claims nothing.
        drain=node.state == NodeState.QUARANTINED or node.paused_at is not None,
        leases=leases,
        cancel=cancel,
        state=node.state,
        # The node's row came with the request: telling the agent costs no query.
        benchmark=node.benchmark_due_id is not None,
    )


def _recent_thermal(node: Node, now: datetime) -> list[str]:
    since = now - timedelta(hours=settings.NODE_THERMAL_WINDOW_H)
    return [t for t in node.thermal_events if datetime.fromisoformat(t) >= since]


def _beat(
    node: Node, *, status: str, load: dict[str, Any], gpus: list[dict[str, Any]], now: datetime
) -> bool:
    """One attempt at recording the beat against the state we believe the node is in."""
    degraded_after, offline_after = deadlines(now)
    throttled = any(gpu.get("throttled") for gpu in gpus)
    frozen = node.state in _FROZEN
    if frozen:
        target = node.state
    elif node.paused_at is not None:
        # The agent learns of the pause from this beat's reply: until it does it still says
        # it is available, and after a resume it still says draining until its next beat.
        target = NodeState.DRAINING
    else:
        target = _STATUS_TARGET[status]
    # An episode is the start of throttling, not every throttled sample: a GPU that throttles
    # for ten minutes is one event, not twenty.
    episode = throttled and not node.throttled and not frozen
    if target == node.state and not episode:
        # The hot path: one statement (nodes/sql/beat.sql), guarded by the state we read at
        # authentication.
        ops = connection.ops
        names = {
            "now": now,
            "degraded_after": degraded_after,
            "offline_after": offline_after,
            "load": ops.adapt_json_value(load, None),
            "gpus": ops.adapt_json_value(gpus, None),
            "throttled": throttled,
            "lazy": commits_alone(),
            "node": node.pk,
            "state": node.state,
        }
        with connection.cursor() as cursor:
            cursor.execute(statement("nodes", "beat"), names)
            changed = cursor.rowcount
        if changed:
            node.throttled = throttled
        return changed == 1

    # The same columns as the hot path's statement, plus what the transition changes.
    sets: dict[str, Any] = {
        "last_heartbeat_at": now,
        "degraded_after": degraded_after,
        "offline_after": offline_after,
        "load": load,
        "gpu_state": gpus,
        "throttled": throttled,
    }
    events: list[tuple[str, dict[str, Any]]] = []
    if target != node.state:
        reason = "operator_paused" if node.paused_at is not None else _REASON[target]
        sets.update(state=target, state_changed_at=now)
        events.append(("NodeStateChanged", {"from": node.state, "to": target, "reason": reason}))
    recent: list[str] = []
    if episode:
        recent = [*_recent_thermal(node, now), now.isoformat()]
        sets["thermal_events"] = recent
        throttling = [gpu.get("index") for gpu in gpus if gpu.get("throttled")]
        events.append(("NodeThermalThrottled", {"gpus": throttling, "recent": len(recent)}))
    with transaction.atomic():
        version = cas_update(
            node_id=node.pk, expect_state=node.state, sets=sets, events=len(events)
        )
        if version is None:
            return False
        append_node_events(node_id=node.pk, version=version, events=events, actor=node.actor)
        for name, value in sets.items():
            setattr(node, name, value)
        node.event_version = version
        if len(recent) >= settings.NODE_THERMAL_EVENTS_MAX:
            node_quarantine(
                node=node,
                rule=Rule.THERMAL,
                actor=node.actor,
                now=now,
                reason=f"{len(recent)} thermal-throttle episodes in "
                f"{settings.NODE_THERMAL_WINDOW_H} h (the limit is "
                f"{settings.NODE_THERMAL_EVENTS_MAX}). Improve the machine's cooling, then ask an "
                "admin to lift the quarantine.",
            )
    return True


class ReapResult(NamedTuple):
    degraded: int
    offline: int


def nodes_reap(*, now: datetime | None = None) -> ReapResult:
    """Move silent nodes on: online → degraded past `degraded_after`; online, degraded or
    draining → offline past `offline_after`. Set-based compare-and-set with one event per move;
    a second run at the same moment finds nothing due and writes nothing.

    Offline first: a node past both deadlines goes straight to offline (one event), and the
    degraded pass then no longer sees it. Each pass moves at most REAP_BATCH nodes per
    transaction, their events written by the same statement (`transition_due_logged`), and
    the offline hook runs in each batch's transaction with that batch's nodes.
    """
    now = now or timezone.now()

    def drain(from_states: tuple[str, ...], to_state: str, deadline: str) -> int:
        moved = 0
        while True:
            with transaction.atomic():
                ids = transition_due_logged(
                    from_states=from_states,
                    to_state=to_state,
                    deadline=deadline,
                    now=now,
                    reason=_MISSED,
                    actor=REAPER,
                    limit=REAP_BATCH,
                    # A node past both deadlines that the offline pass skipped (its row held
                    # by a completion) is the next run's to take offline, not this one's to
                    # degrade.
                    unless_past="offline_after" if to_state == NodeState.DEGRADED else None,
                )
                if to_state == NodeState.OFFLINE:
                    notify_offline(ids)
            if ids:
                metrics.REAPED.labels(to_state).observe(len(ids))
            moved += len(ids)
            if len(ids) < REAP_BATCH:
                return moved

    started = time.perf_counter()
    workers = settings.NODE_REAPER_WORKERS
    # Inside a caller's transaction (a test's, a management shell's) the batches must see what
    # it wrote: one connection, this one.
    if workers < 2 or connection.in_atomic_block:
        offline = drain(LIVE_STATES, NodeState.OFFLINE, "offline_after")
        degraded = drain((NodeState.ONLINE,), NodeState.DEGRADED, "degraded_after")
    else:
        offline = _in_parallel(workers, drain, LIVE_STATES, NodeState.OFFLINE, "offline_after")
        # Only once every offline batch is in: a node past both deadlines goes offline, not
        # degraded.
        degraded = _in_parallel(
            workers, drain, (NodeState.ONLINE,), NodeState.DEGRADED, "degraded_after"
        )
    metrics.REAP_SECONDS.observe(time.perf_counter() - started)
    return ReapResult(degraded=degraded, offline=offline)


def _in_parallel(workers: int, drain: Any, *args: Any) -> int:
    """Run `drain` on `workers` threads, each with its own database connection: the batches
    are disjoint (`FOR UPDATE SKIP LOCKED`), and PostgreSQL's row work, which is all of a
    reap, then uses every core. Returns how many nodes moved in all."""

    def one() -> int:
        try:
            return drain(*args)
        finally:
            connection.close()  # this thread's own

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reaper") as pool:
        return sum(f.result() for f in [pool.submit(one) for _ in range(workers)])
