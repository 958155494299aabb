"""Reads: an operator's nodes, a node's history from the event log, and the pool's online nodes."""

from typing import Any

from django.db.models import Count, QuerySet
from django.http import Http404

from ledger.models import Event
from nodes.models import Node, NodeState


def node_list(*, operator: Any) -> QuerySet[Node]:
    # Through Ownership's index: nodes_node has none by operator (nodes.models.Ownership).
    return Node.objects.filter(ownership__operator=operator)


def node_get(*, operator: Any, node_id: int) -> Node:
    """The operator's node; another operator's node is 404, exactly like a missing one, so ids
    reveal nothing."""
    node = Node.objects.filter(operator=operator, pk=node_id).first()
    if node is None:
        raise Http404("no such node")
    return node


def node_history(*, node: Node) -> QuerySet[Event]:
    return Event.objects.filter(stream=node.stream)


def market_tflops(region: str, tier: str) -> float | None:
    """The median measured TFLOPS (nodes.measured.headline_tflops) of the online nodes of a
    (region, tier) market; a blank region is every region. None where none was measured."""
    from statistics import median

    from nodes.measured import headline_tflops

    nodes = Node.objects.filter(state=NodeState.ONLINE, tier=tier).exclude(measured={})
    if region:
        nodes = nodes.filter(region=region)
    figures = [headline_tflops(m) for m in nodes.values_list("measured", flat=True)[:1000]]
    measured = [f for f in figures if f]
    return round(median(measured), 3) if measured else None


def nodes_online_by_market() -> dict[tuple[str, str], int]:
    """Online nodes counted per (region, tier): one grouped read of the node_online_market
    index (its key and predicate), whatever the number of nodes."""
    rows = (
        Node.objects.filter(state=NodeState.ONLINE)
        .values_list("region", "tier")
        .annotate(count=Count("*"))
        .order_by()
    )
    return {(region, tier): count for region, tier, count in rows}
