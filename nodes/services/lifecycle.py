"""Registration, renaming, retirement and hardware changes of a node."""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from nodes.capabilities import NormalisedCapabilities, normalise
from nodes.errors import NodeLimitReached, NodeRetired, NodeStateConflict
from nodes.hooks import notify_offline
from nodes.measured import routed
from nodes.models import CLAIMABLE_STATES, AgentKey, DriverBlock, Node, NodeState, Ownership
from nodes.services.benchmarks import benchmark_issue
from nodes.services.cas import append_node_events, cas_update
from nodes.services.quarantine import Rule, blocked_driver, driver_reason, node_quarantine
from nodes.tiers import TierTable
from people.keys import AGENT_PREFIX, display_prefix, generate_key, hash_key

_CAS_ATTEMPTS = 5
# Reported VRAM may wobble by a few MB between tools; less than 98% of the registered figure is
# a node that claimed more than it has.
VRAM_TOLERANCE = 0.98
# Changes to these are events (they move the node between markets and job gates); the rest of a
# capabilities report (free disk, the raw JSON, the agent's version) is updated quietly.
_IDENTITY = (
    "tier",
    "claimed_tier",
    "gpu_count",
    "gpu_name",
    "gpu_vendor",
    "gpu_vram_mb",
    "compute_capability",
    "driver_version",
    "fp16_ok",
    "cpu_cores",
    "ram_mb",
    "avx2",
    "avx512",
    "sandboxes",
)


# What the benchmark measures: a change in any of these, as reported, asks for a new benchmark.
_MEASURED_HARDWARE = ("gpu_count", "gpu_name", "gpu_vram_mb", "compute_capability", "cpu_cores")


def _driver_check(node: Node, caps: NormalisedCapabilities, actor: str) -> None:
    block = blocked_driver(
        list(DriverBlock.objects.all()), vendor=caps.gpu_vendor, version=caps.driver_version
    )
    if block is not None:
        node_quarantine(
            node=node,
            rule=Rule.DRIVER,
            actor=actor,
            reason=driver_reason(block, caps.driver_version),
        )


def node_register(
    *,
    operator: Any,
    name: str,
    region: str,
    capabilities: dict[str, Any],
    actor: str,
    price_floor: int = 0,
) -> tuple[Node, str]:
    """Create the node (offline until its first heartbeat) and its agent key. The plaintext key
    is returned once and never stored."""
    # A soft cap against runaway scripts: two registrations racing may pass it together.
    in_service = Node.objects.filter(ownership__operator=operator).exclude(state=NodeState.RETIRED)
    if in_service.count() >= settings.NODE_MAX_PER_OPERATOR:
        raise NodeLimitReached(
            f"an operator may have at most {settings.NODE_MAX_PER_OPERATOR} nodes; retire some"
        )
    tiers = TierTable.load()
    caps = normalise(capabilities, tiers)
    # Nothing is measured yet: the node is cpu until its first benchmark passes.
    fields = routed(caps, measured={}, confirmed_tier="", tiers=tiers)
    plaintext = generate_key(AGENT_PREFIX)
    with transaction.atomic():
        node = Node.objects.create(
            operator=operator,
            name=name,
            region=region,
            price_floor=price_floor,
            agent_key_prefix=display_prefix(plaintext),
            event_version=1,
            **fields,
        )
        AgentKey.objects.create(node=node, key_hash=hash_key(plaintext))
        Ownership.objects.create(node=node, operator=operator)
        append_node_events(
            node_id=node.pk,
            version=1,
            actor=actor,
            events=[
                (
                    "NodeRegistered",
                    {
                        "node_id": node.pk,
                        "operator_id": operator.pk,
                        "name": name,
                        "region": region,
                        "price_floor": price_floor,
                        "state": node.state,
                        "tier": node.tier,
                        "gpu_name": caps.gpu_name,
                        "gpu_vram_mb": caps.gpu_vram_mb,
                        "compute_capability": caps.compute_capability,
                        "driver_version": caps.driver_version,
                        "key_prefix": node.agent_key_prefix,
                    },
                )
            ],
        )
        _driver_check(node, caps, actor)
        benchmark_issue(node=node, reason="new", actor=actor)
    return node, plaintext


def _refresh_state(node: Node) -> None:
    node.state = Node.objects.values_list("state", flat=True).get(pk=node.pk)


def node_update(
    *, node: Node, actor: str, name: str | None = None, price_floor: int | None = None
) -> Node:
    """The operator's settings: the name, the price floor. Each change is its own event."""
    sets: dict[str, Any] = {}
    events: list[tuple[str, dict[str, Any]]] = []
    if name is not None and name != node.name:
        sets["name"] = name
        events.append(("NodeRenamed", {"name": name, "previous": node.name}))
    if price_floor is not None and price_floor != node.price_floor:
        sets["price_floor"] = price_floor
        events.append(
            ("NodePriceFloorSet", {"price_floor": price_floor, "previous": node.price_floor})
        )
    if not events:
        return node
    for _ in range(_CAS_ATTEMPTS):
        if node.state == NodeState.RETIRED:
            raise NodeRetired(f"node {node.pk} is retired")
        with transaction.atomic():
            version = cas_update(
                node_id=node.pk, expect_state=node.state, sets=sets, events=len(events)
            )
            if version is not None:
                append_node_events(node_id=node.pk, version=version, actor=actor, events=events)
                for field, value in sets.items():
                    setattr(node, field, value)
                node.event_version = version
                return node
        _refresh_state(node)
    raise NodeStateConflict(f"node {node.pk} kept changing state; try again")


def node_pause(*, node: Node, actor: str, now: datetime | None = None) -> bool:
    """The operator's pause: the node finishes what it runs and takes no new work until
    `node_resume`. A node that takes work now moves to draining at once (its waiting claims end
    on commit); one that is offline or quarantined keeps its state and drains when it next
    beats. False if it was already paused."""
    now = now or timezone.now()
    for _ in range(_CAS_ATTEMPTS):
        if node.state == NodeState.RETIRED:
            raise NodeRetired(f"node {node.pk} is retired")
        if node.paused_at is not None:
            return False
        sets: dict[str, Any] = {"paused_at": now}
        if node.state in CLAIMABLE_STATES:
            sets.update(state=NodeState.DRAINING, state_changed_at=now)
        to = sets.get("state", node.state)
        if _evented(node, actor, sets, ("NodePaused", {"from": node.state, "to": to})):
            return True
        _refresh_pause(node)
    raise NodeStateConflict(f"node {node.pk} kept changing state; try again")


def node_resume(*, node: Node, actor: str) -> bool:
    """End the operator's pause. The state stays as it is: the agent, told on its next heartbeat
    that the hub no longer drains it, reports itself available and that beat brings the node
    online. False if it was not paused."""
    for _ in range(_CAS_ATTEMPTS):
        if node.state == NodeState.RETIRED:
            raise NodeRetired(f"node {node.pk} is retired")
        if node.paused_at is None:
            return False
        event = ("NodeResumed", {"from": node.state, "to": node.state})
        if _evented(node, actor, {"paused_at": None}, event):
            return True
        _refresh_pause(node)
    raise NodeStateConflict(f"node {node.pk} kept changing state; try again")


def _evented(node: Node, actor: str, sets: dict[str, Any], event: tuple[str, Any]) -> bool:
    """Apply `sets` and append `event` in one transaction if the node is still in the state we
    read; False when it moved first (the caller reads it again)."""
    with transaction.atomic():
        version = cas_update(node_id=node.pk, expect_state=node.state, sets=sets, events=1)
        if version is None:
            return False
        append_node_events(node_id=node.pk, version=version, actor=actor, events=[event])
    for field, value in sets.items():
        setattr(node, field, value)
    node.event_version = version
    return True


def _refresh_pause(node: Node) -> None:
    node.state, node.paused_at = Node.objects.values_list("state", "paused_at").get(pk=node.pk)


def node_retire(*, node: Node, actor: str, now: datetime | None = None) -> bool:
    """Retire the node for good and revoke its agent key. False if it was already retired."""
    now = now or timezone.now()
    for _ in range(_CAS_ATTEMPTS):
        if node.state == NodeState.RETIRED:
            return False
        sets = {"state": NodeState.RETIRED, "state_changed_at": now, "key_revoked_at": now}
        with transaction.atomic():
            version = cas_update(node_id=node.pk, expect_state=node.state, sets=sets, events=1)
            if version is not None:
                append_node_events(
                    node_id=node.pk,
                    version=version,
                    actor=actor,
                    events=[("NodeRetired", {"from": node.state, "to": NodeState.RETIRED})],
                )
                notify_offline([node.pk])
                for field, value in sets.items():
                    setattr(node, field, value)
                node.event_version = version
                return True
        _refresh_state(node)
    raise NodeStateConflict(f"node {node.pk} kept changing state; try again")


def node_capabilities_update(*, node: Node, capabilities: dict[str, Any], actor: str) -> None:
    """The agent reported its hardware again (it does on every start). Hardware changes are
    evented; less VRAM than registered, or a blocklisted driver, quarantines the node."""
    tiers = TierTable.load()
    caps = normalise(capabilities, tiers)
    fields = routed(caps, measured=node.measured, confirmed_tier=node.confirmed_tier, tiers=tiers)
    changed = [name for name in _IDENTITY if getattr(node, name) != fields[name]]
    previous = normalise(node.capabilities, tiers) if node.capabilities else None
    rebenchmark = previous is not None and any(
        getattr(previous, name) != getattr(caps, name) for name in _MEASURED_HARDWARE
    )
    shrunk = (
        node.gpu_vram_mb
        and caps.gpu_vram_mb is not None
        and caps.gpu_vram_mb < node.gpu_vram_mb * VRAM_TOLERANCE
    )
    registered_vram = node.gpu_vram_mb
    with transaction.atomic():
        version = cas_update(
            node_id=node.pk, expect_state=None, sets=fields, events=1 if changed else 0
        )
        if version is None:
            return
        if changed:
            append_node_events(
                node_id=node.pk,
                version=version,
                actor=actor,
                events=[
                    (
                        "NodeCapabilitiesChanged",
                        {
                            "tier": fields["tier"],
                            "previous_tier": node.tier,
                            "gpu_name": caps.gpu_name,
                            "gpu_vram_mb": caps.gpu_vram_mb,
                            "compute_capability": caps.compute_capability,
                            "driver_version": caps.driver_version,
                            "cpu_cores": caps.cpu_cores,
                            "ram_mb": caps.ram_mb,
                        },
                    )
                ],
            )
        for name, value in fields.items():
            setattr(node, name, value)
        node.event_version = version
        if shrunk:
            node_quarantine(
                node=node,
                rule=Rule.VRAM,
                actor=actor,
                reason=f"The GPU reports {caps.gpu_vram_mb} MB of VRAM; the node was registered "
                f"with {registered_vram} MB. Register the node again if its hardware changed.",
            )
        elif "driver_version" in changed or "gpu_vendor" in changed:
            _driver_check(node, caps, actor)
        if rebenchmark:
            benchmark_issue(node=node, reason="hardware", actor=actor)
