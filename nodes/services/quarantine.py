"""Disqualification: quarantine with a reason the operator sees, and an admin's lift."""

from datetime import datetime
from enum import StrEnum
from fnmatch import fnmatchcase

from django.db import transaction
from django.utils import timezone

from core.alerts import alert
from core.metrics import after_commit
from nodes import metrics
from nodes.errors import NodeStateConflict
from nodes.hooks import notify_offline
from nodes.models import PRIOR_ALPHA, PRIOR_BETA, DriverBlock, Node, NodeState
from nodes.services.cas import append_node_events, cas_update

_CAS_ATTEMPTS = 5


class Rule(StrEnum):
    DRIVER = "driver_blocklisted"
    THERMAL = "thermal_throttling"
    ERROR_RATE = "error_rate"
    RESULTS = "results_rejected"
    VRAM = "vram_mismatch"
    ADMIN = "admin"


def node_quarantine(
    *, node: Node, rule: str, reason: str, actor: str, now: datetime | None = None
) -> bool:
    """Quarantine the node from whatever state it is in (but retired). True if this call did;
    False if it was already quarantined or retired. Leaves `node` up to date."""
    now = now or timezone.now()
    reason = reason[:500]
    for _ in range(_CAS_ATTEMPTS):
        if node.state in (NodeState.QUARANTINED, NodeState.RETIRED):
            return False
        sets = {
            "state": NodeState.QUARANTINED,
            "state_changed_at": now,
            "quarantine_rule": rule,
            "quarantine_reason": reason,
            "quarantined_at": now,
        }
        with transaction.atomic():
            version = cas_update(node_id=node.pk, expect_state=node.state, sets=sets, events=1)
            if version is not None:
                append_node_events(
                    node_id=node.pk,
                    version=version,
                    actor=actor,
                    events=[
                        (
                            "NodeQuarantined",
                            {
                                "from": node.state,
                                "to": NodeState.QUARANTINED,
                                "rule": rule,
                                "reason": reason,
                            },
                        )
                    ],
                )
                notify_offline([node.pk])
                _tell_admins(node, rule, reason)
                for name, value in sets.items():
                    setattr(node, name, value)
                node.event_version = version
                return True
        # Someone moved it between our read and our write: look again.
        node.state = Node.objects.values_list("state", flat=True).get(pk=node.pk)
    raise NodeStateConflict(f"node {node.pk} kept changing state; try again")


def _tell_admins(node: Node, rule: str, reason: str) -> None:
    """Count the quarantine and alert the admins, once it commits."""
    after_commit(lambda: metrics.QUARANTINED.labels(rule).inc())
    if rule == Rule.DRIVER:
        kind, subject = "blocked_driver", f"Blocked GPU driver seen on node {node.pk}"
    else:
        kind, subject = "node_quarantined", f"Node {node.pk} quarantined ({rule})"
    alert(
        kind,
        subject,
        f"Node {node.pk} ({node.name}, operator {node.operator_id}, tier {node.tier}, region "
        f"{node.region or '-'}) was quarantined from {node.state} by the rule {rule}.\n\n"
        f"Reason: {reason}\n\nIt takes no work until an admin lifts the quarantine.",
    )


def node_quarantine_lift(*, node: Node, actor: str, now: datetime | None = None) -> bool:
    """quarantined → offline; the next heartbeat brings it online. The evidence behind the
    quarantine is reset (thermal history, reliability back to a new node's prior), so it is
    judged afresh rather than re-quarantined by the same samples."""
    now = now or timezone.now()
    sets = {
        "state": NodeState.OFFLINE,
        "state_changed_at": now,
        "quarantine_rule": "",
        "quarantine_reason": "",
        "quarantined_at": None,
        "thermal_events": [],
        "throttled": False,
        "rel_alpha": PRIOR_ALPHA,
        "rel_beta": PRIOR_BETA,
        "reliability": PRIOR_ALPHA / (PRIOR_ALPHA + PRIOR_BETA),
        "reliability_at": now,
        "consecutive_failures": 0,
        "cooldown_until": None,
    }
    with transaction.atomic():
        version = cas_update(
            node_id=node.pk, expect_state=NodeState.QUARANTINED, sets=sets, events=1
        )
        if version is None:
            return False
        append_node_events(
            node_id=node.pk,
            version=version,
            actor=actor,
            events=[
                ("NodeQuarantineLifted", {"from": NodeState.QUARANTINED, "to": NodeState.OFFLINE})
            ],
        )
    for name, value in sets.items():
        setattr(node, name, value)
    node.event_version = version
    return True


def blocked_driver(blocks: list[DriverBlock], *, vendor: str, version: str) -> DriverBlock | None:
    if not version:
        return None
    for block in blocks:
        if block.vendor and block.vendor.lower() != vendor.lower():
            continue
        if fnmatchcase(version, block.pattern):
            return block
    return None


def driver_reason(block: DriverBlock, version: str) -> str:
    return (
        f"GPU driver {version} is blocklisted ({block.reason}). Install another driver "
        "version, then ask an admin to lift the quarantine."
    )


def driver_blocks_enforce(*, actor: str) -> int:
    """Quarantine every node in service whose driver a block matches (after a block is added).
    Returns how many were quarantined."""
    blocks = list(DriverBlock.objects.all())
    if not blocks:
        return 0
    in_service = Node.objects.exclude(state__in=(NodeState.QUARANTINED, NodeState.RETIRED))
    # Distinct (vendor, version) pairs first: a fleet runs a few drivers, not one per node.
    pairs = in_service.exclude(driver_version="").values_list("gpu_vendor", "driver_version")
    matched: dict[tuple[str, str], DriverBlock] = {}
    for vendor, version in pairs.distinct():
        block = blocked_driver(blocks, vendor=vendor, version=version)
        if block is not None:
            matched[(vendor, version)] = block
    count = 0
    for (vendor, version), block in matched.items():
        for node in in_service.filter(gpu_vendor=vendor, driver_version=version):
            count += node_quarantine(
                node=node, rule=Rule.DRIVER, reason=driver_reason(block, version), actor=actor
            )
    return count
