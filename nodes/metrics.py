from collections.abc import Iterable

from django.db.models import Count

from nodes.models import Node, NodeState


def node_samples() -> Iterable[tuple[dict[str, str], float]]:
    rows = Node.objects.values("state").annotate(n=Count("id")).order_by()
    counts = {row["state"]: row["n"] for row in rows}
    return [({"state": state}, counts.get(state, 0)) for state in NodeState.values]
