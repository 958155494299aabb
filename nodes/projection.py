"""The nodes table as the log tells it: state, name, tier, operator and stream version."""

from dataclasses import dataclass

from ledger.models import Event
from nodes.models import Node


@dataclass
class ReplayedNode:
    operator_id: int
    name: str
    state: str
    tier: str
    version: int


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
                payload["operator_id"], payload["name"], payload["state"], payload["tier"], 0
            )
        node = self.nodes.get(node_id)
        if node is None:
            self.orphans.append(
                f"nodes: {event.stream}@{event.version} {event.type} "
                "comes before the node's NodeRegistered"
            )
            return
        node.version += 1
        if "to" in payload:
            node.state = payload["to"]
        if event.type == "NodeRenamed":
            node.name = payload["name"]
        elif event.type == "NodeCapabilitiesChanged":
            node.tier = payload["tier"]

    def diff(self) -> list[str]:
        problems = list(self.orphans)
        live = {
            row[0]: row[1:]
            for row in Node.objects.values_list(
                "id", "operator_id", "name", "state", "tier", "event_version"
            ).iterator(chunk_size=5000)
        }
        for node_id in sorted(set(live) | set(self.nodes)):
            replayed = self.nodes.get(node_id)
            row = live.get(node_id)
            if row is None:
                problems.append(f"nodes: node {node_id} is in the log but has no row")
                continue
            if replayed is None:
                problems.append(f"nodes: node {node_id} has a row but no NodeRegistered event")
                continue
            expected = (
                replayed.operator_id,
                replayed.name,
                replayed.state,
                replayed.tier,
                replayed.version,
            )
            for label, have, want in zip(
                ("operator", "name", "state", "tier", "event_version"),
                row,
                expected,
                strict=True,
            ):
                if have != want:
                    problems.append(
                        f"nodes: node {node_id} {label}: the table says {have!r}, "
                        f"the log says {want!r}"
                    )
        return problems
