"""What the claim needs to know about a node, read from its row: once per claim request, and
again whenever the claim's statement finds the row has moved since (jobs/sql/claim_node.sql)."""

from dataclasses import dataclass
from functools import cached_property

from django.utils import timezone

from jobs import billing
from jobs.size_class import node_size_classes
from nodes.models import CLAIMABLE_STATES, Node
from nodes.trust import node_trusted


@dataclass(frozen=True)
class NodeProfile:
    node_id: int
    version: int  # the node's stream version when read: any event of the node moves it
    operator_id: int
    can_claim: bool
    region: str
    tier: str
    vram_mb: int
    compute_capability: int
    cpu_cores: int
    ram_mb: int
    disk_mb: int
    gpu_count: int
    price: billing.NodePrice
    trusted: bool  # trust earned (nodes.trust): high-priority work, last attempts, spot-checks
    fit: float  # tier multiplier: better nodes are woken first when work arrives

    @property
    def price_per_s(self) -> int:
        return self.price.per_s

    @cached_property  # read by every claim's statement, its parameters and its retries
    def size_classes(self) -> list[int] | None:
        """The queue's size classes this node claims through, or None: the queue's index."""
        return node_size_classes(self.cpu_cores, self.ram_mb, self.gpu_count)


def profile_for(node: Node, *, fresh: bool = False) -> NodeProfile:
    """The node's profile; `fresh` reads the spot price now rather than from the process's
    few seconds' cache."""
    now = timezone.now()
    can_claim = node.state in CLAIMABLE_STATES and not node.cooling_down(now)
    return NodeProfile(
        node_id=node.pk,
        version=node.event_version,
        operator_id=node.operator_id,
        can_claim=can_claim,
        region=node.region or "",
        tier=node.tier,
        vram_mb=node.gpu_vram_mb or 0,
        compute_capability=node.compute_capability or 0,
        cpu_cores=node.cpu_cores or 1,
        ram_mb=node.ram_mb or 0,
        disk_mb=node.disk_mb or 0,
        gpu_count=node.gpu_count,
        price=billing.node_price(node, fresh=fresh),
        trusted=node_trusted(node),
        fit=billing.tier_multiplier(node.tier),
    )


def profile_reread(profile: NodeProfile) -> NodeProfile | None:
    """The profile of the node as it is now (its row and the market read again), or None when
    the node is gone."""
    node = Node.objects.filter(pk=profile.node_id).first()
    return profile_for(node, fresh=True) if node is not None else None
