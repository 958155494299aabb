"""Why a queued job is not placed yet: a short answer from what exists now.

The claim is the rule (jobs/sql/task_gates.sql); this only reads the same gates back over the
nodes that could take work, to tell a waiting submitter which one stops them: no node meets the
requirements, every price is above the ceiling, or a retry waiting out its backoff.
"""

from django.db.models import Min, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.models import Job, Task, TaskState
from ledger import pricing, quotes
from ledger.display import credits_per_s
from nodes.models import CLAIMABLE_STATES, Node


def _fitting(job: Job, nodes: QuerySet[Node]) -> QuerySet[Node]:
    """The nodes that pass the job's hard gates, read as the claim reads a node
    (jobs.node_profile: an unreported size counts as none, an unreported core count as one)."""
    fitting = nodes.annotate(
        cores=Coalesce("cpu_cores", 1),
        ram=Coalesce("ram_mb", 0),
        disk=Coalesce("disk_mb", 0),
        vram=Coalesce("gpu_vram_mb", 0),
        cc=Coalesce("compute_capability", 0),
    ).filter(
        cores__gte=job.cpu_cores,
        ram__gte=job.ram_mb,
        disk__gte=job.disk_mb,
        vram__gte=job.min_vram_mb,
        cc__gte=job.min_compute_capability,
        gpu_count__gte=job.gpu_count,
    )
    if job.region:
        fitting = fitting.filter(region=job.region)
    if job.gpu_tiers:
        fitting = fitting.filter(tier__in=job.gpu_tiers)
    return fitting


def _cheapest(fitting: QuerySet[Node]) -> int | None:
    """The lowest price among the nodes: a node's price is max(its market's spot, its floor),
    so each market's cheapest is its spot against its lowest floor (one row per market)."""
    rules = pricing.rules_at()
    prices = [
        quotes.node_price(
            spot_per_s_minor=pricing.spot_price_get(region=region, tier=tier, rules=rules),
            floor_per_s_minor=floor or 0,
        )
        for region, tier, floor in fitting.values_list("region", "tier")
        .annotate(floor=Min("price_floor"))
        .values_list("region", "tier", "floor")
    ]
    return min(prices, default=None)


def placement_reasons(job: Job) -> list[str]:
    """Why the job's queued tasks wait; empty when nothing stops them (a node will claim)."""
    queued = Task.objects.filter(job=job, state=TaskState.QUEUED)
    if job.cancel_requested_at or not queued.exists():
        return []
    reasons = []
    now = timezone.now()
    backoff = queued.filter(available_at__gt=now).order_by("available_at").first()
    if backoff is not None:
        seconds = max(1, int((backoff.available_at - now).total_seconds()))
        reasons.append(
            f"A task is waiting out a retry backoff after a failed or lost attempt "
            f"({seconds} s more); the nodes that lost it are passed over for a while."
        )
    nodes = Node.objects.filter(state__in=CLAIMABLE_STATES).exclude(cooldown_until__gt=now)
    online = nodes.count()
    cheapest = _cheapest(_fitting(job, nodes)) if online else None
    if not online:
        reasons.append("No node is online to take work right now.")
    elif cheapest is None:
        reasons.append(
            f"No online node meets the job's requirements ({online} online: "
            "check cores, RAM, disk, GPUs, VRAM, tiers and region)."
        )
    elif cheapest > job.price_ceiling:
        reasons.append(
            f"The price ceiling is below every price: the cheapest node that meets the "
            f"requirements asks {credits_per_s(cheapest)}, the job pays at most "
            f"{credits_per_s(job.price_ceiling)}."
        )
    return reasons
