"""Where apps above nodes (jobs) plug into heartbeats and into nodes leaving service.

nodes never imports jobs; jobs registers its functions here from its AppConfig.ready.

Heartbeat hook: `fn(node, lease_tokens) -> {"leases": {token: expires_at_iso}, "cancel": [token]}`.
Called on every heartbeat after the node's own update, with the lease tokens the agent says it
holds (possibly none), outside any transaction. Either key may be missed out. It is on the hot
path: return without a query when there is nothing to do, and extend every lease in one
statement. An exception fails the heartbeat (the agent retries); the node's liveness is already
recorded by then.

Claims-end hook: `fn(node_ids)`, called after the commit that moved these nodes to a state in
which they take no new work (draining, offline, quarantined, retired): the claims they have
waiting must end now, empty, rather than at the end of their wait. Called outside any
transaction; it must not fail (a lost call only lets a waiting claim run out its wait, and the
claim itself still gives such a node nothing).

Offline hook: `fn(node_ids)`, called with the ids of nodes that just left service: went
offline (reaper), were quarantined or were retired. It runs inside the transaction that moved
them, so "the node is out" and "its leases are back in the queue" commit together or not at all,
and a crash between the two cannot leave an offline node holding leases. Keep it set-based (one
UPDATE … WHERE node_id IN …): the reaper passes up to one batch of ids (nodes.services.liveness
REAP_BATCH, thousands) per call. An exception rolls that batch's transition back, and the reaper
tries again on its next run. Lock no node row in it (see docs/architecture.md, "Lock order"):
anything done to the nodes themselves goes in `transaction.on_commit`.
"""

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction

if TYPE_CHECKING:
    from nodes.models import Node

HeartbeatHook = Callable[["Node", list[str]], dict[str, Any] | None]
OfflineHook = Callable[[list[int]], None]
ClaimsEndHook = Callable[[list[int]], None]

_heartbeat_hooks: list[HeartbeatHook] = []
_offline_hooks: list[OfflineHook] = []
_claims_end_hooks: list[ClaimsEndHook] = []


def register_heartbeat_hook(fn: HeartbeatHook) -> None:
    if fn not in _heartbeat_hooks:  # ready() may run twice (tests, reloads)
        _heartbeat_hooks.append(fn)


def register_offline_hook(fn: OfflineHook) -> None:
    if fn not in _offline_hooks:
        _offline_hooks.append(fn)


def register_claims_end_hook(fn: ClaimsEndHook) -> None:
    if fn not in _claims_end_hooks:
        _claims_end_hooks.append(fn)


def unregister(fn: Callable[..., Any]) -> None:
    for hooks in (_heartbeat_hooks, _offline_hooks, _claims_end_hooks):
        if fn in hooks:
            hooks.remove(fn)


def heartbeat_contributions(
    node: "Node", lease_tokens: list[str]
) -> tuple[dict[str, str], list[str]]:
    leases: dict[str, str] = {}
    cancel: list[str] = []
    for hook in _heartbeat_hooks:
        contribution = hook(node, list(lease_tokens)) or {}
        leases.update(contribution.get("leases") or {})
        cancel.extend(t for t in contribution.get("cancel") or [] if t not in cancel)
    return leases, cancel


def notify_offline(node_ids: Sequence[int]) -> None:
    if not node_ids:
        return
    ids = list(node_ids)
    for hook in _offline_hooks:
        hook(ids)


def claims_end_on_commit(node_ids: Sequence[int]) -> None:
    """Once the caller's transaction commits, end the waiting claims of these nodes."""
    if not node_ids:
        return
    ids = list(node_ids)

    def run() -> None:
        for hook in _claims_end_hooks:
            hook(ids)

    transaction.on_commit(run)
