"""The seam between jobs and money: every credit a job holds, pays or releases goes through here
to the ledger's settlement services, inside the caller's transaction."""

from functools import lru_cache

from django.core.cache import cache

from jobs.models import Attempt, Job
from ledger import pricing, settlement
from nodes.models import Node
from nodes.services import node_record_outcome

_PRICE_CACHE_S = 5


def hold(*, job: Job) -> None:
    """Hold the job's worst case: price ceiling × timeout × slices (InsufficientFunds: 402)."""
    settlement.credits_hold(
        submitter_id=job.submitter_id,
        job_id=job.pk,
        amount=job.max_cost,
        actor=f"user:{job.submitter_id}",
    )


def settle(*, attempt_id: int, runtime_ms: int, charge: bool) -> int:
    """Settle one attempt exactly once; returns what was charged (0 when not charged)."""
    row = (
        Attempt.objects.filter(pk=attempt_id)
        .values_list(
            "task__job_id",
            "task__job__submitter_id",
            "node__operator_id",
            "price_per_s",
            "task__job__timeout_s",
            "leased_at",
            "node__tier",
            "node__region",
            "task__job__kind",
            "node_id",
        )
        .get()
    )
    job_id, submitter_id, operator_id, price, timeout_s, leased_at, tier, region, kind, node = row
    entry = settlement.attempt_settle(
        attempt_id=attempt_id,
        job_id=job_id,
        submitter_id=submitter_id,
        operator_id=operator_id,
        price_per_s_minor=price,
        runtime_ms=runtime_ms,
        timeout_ms=timeout_s * 1000,
        charge=charge,
        priced_at=leased_at,
        tier=tier,
        region=region,
        job_kind=kind,
        node_id=node,
        actor="system:settlement",
    )
    return entry.event.payload["charged_minor"] if entry is not None else 0


def release(*, job_id: int) -> None:
    submitter_id = Job.objects.values_list("submitter_id", flat=True).get(pk=job_id)
    settlement.hold_release(job_id=job_id, submitter_id=submitter_id, actor="system")


def record_outcome(*, node_id: int, success: bool) -> None:
    node_record_outcome(node_id=node_id, success=success, actor="system:jobs")


def node_price(node: Node) -> int:
    """max(spot price for the node's region and tier, the node's own floor), cached briefly:
    the claim is the hot path and the market moves once a minute."""
    key = f"spot:{node.region}:{node.tier}"
    spot = cache.get(key)
    if spot is None:
        spot = pricing.spot_price_get(region=node.region, tier=node.tier)
        cache.set(key, spot, _PRICE_CACHE_S)
    return max(spot, getattr(node, "price_floor", 0) or 0)


def tier_multiplier(tier: str) -> float:
    return float(_multipliers().get(tier, 1.0))


@lru_cache(maxsize=1)
def _multipliers() -> dict[str, float]:
    from nodes.models import GpuTier

    return {t.slug: float(t.multiplier) for t in GpuTier.objects.all()}


def known_tiers() -> set[str]:
    from nodes.models import GpuTier

    return set(GpuTier.objects.values_list("slug", flat=True)) | set(pricing.known_tiers())


def known_regions() -> set[str]:
    """ISO-2 codes a job may ask for: those the price book names and those nodes are in."""
    named = set(pricing.EU_COUNTRIES) | {"IN", "US", "GB"}
    return named | set(Node.objects.exclude(region="").values_list("region", flat=True).distinct())
