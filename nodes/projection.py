"""The nodes table as the log tells it: operator, name, state, tier, price floor, stream version."""

from dataclasses import astuple, dataclass

from ledger.models import Event
from nodes.models import Node, Ownership


@dataclass
class ReplayedNode:
    operator_id: int
    name: str
    state: str
    tier: str
    price_floor: int
    event_version: int = 0


# The columns compared, in ReplayedNode's order.
FIELDS = ("operator_id", "name", "state", "tier", "price_floor", "event_version")


class NodesProjection:
    name = "nodes"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.nodes: dict[int, ReplayedNode] = {}
        self.orphans: list[str] = []

    def apply(self, event: Event) -> None:
        if not event.stream.startswith("node:"):
            return
        node_id = int(event.stream.split(":", 1)[1])
        payload = event.payload
        if event.type == "NodeRegistered":
            self.nodes[node_id] = ReplayedNode(
                payload["operator_id"],
                payload["name"],
                payload["state"],
                payload["tier"],
                payload["price_floor"],
            )
        node = self.nodes.get(node_id)
        if node is None:
            self.orphans.append(
                f"nodes: {event.stream}@{event.version} {event.type} comes before the node's "
                "NodeRegistered"
            )
            return
        node.event_version += 1
        if "to" in payload:
            node.state = payload["to"]
        if event.type == "NodeRenamed":
            node.name = payload["name"]
        elif event.type in ("NodeCapabilitiesChanged", "NodeTierMeasured", "NodeTierConfirmed"):
            node.tier = payload["tier"]
        elif event.type == "NodePriceFloorSet":
            node.price_floor = payload["price_floor"]

    def diff(self) -> list[str]:
        problems = list(self.orphans)
        live = {
            row[0]: row[1:]
            for row in Node.objects.values_list("id", *FIELDS).iterator(chunk_size=5000)
        }
        for node_id in sorted(set(live) | set(self.nodes)):
            replayed = self.nodes.get(node_id)
            row = live.get(node_id)
            if row is None:
                problems.append(f"nodes: node {node_id} is in the log but has no row")
            elif replayed is None:
                problems.append(f"nodes: node {node_id} has a row but no NodeRegistered event")
            else:
                problems.extend(
                    f"nodes: node {node_id} {label}: the table says {have!r}, the log says {want!r}"
                    for label, have, want in zip(FIELDS, row, astuple(replayed), strict=True)
                    if have != want
                )
        # The operator's list reads the node's operator from Ownership: the same operator.
        owners = dict(
            Ownership.objects.values_list("node_id", "operator_id").iterator(chunk_size=5000)
        )
        problems.extend(
            f"nodes: node {node_id} belongs to operator {row[0]}, its ownership row says "
            f"{owners.get(node_id)}"
            for node_id, row in sorted(live.items())
            if owners.get(node_id) != row[0]
        )
        return problems
