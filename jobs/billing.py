"""The seam between jobs and money: every credit a job holds, pays or releases goes through here
to the ledger's settlement services, inside the caller's transaction."""

import time
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from jobs.models import Attempt, Job
from ledger import pricing, quotes, settlement
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


@dataclass(frozen=True)
class SettleFigures:
    """What a settlement needs of the attempt, its job and its node."""

    job_id: int
    submitter_id: int
    operator_id: int
    price_per_s: int
    timeout_s: int
    leased_at: datetime
    tier: str
    region: str
    kind: str
    node_id: int


def _figures(attempt_id: int) -> SettleFigures:
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
    return SettleFigures(*row)


def hold_lock(*, attempt_id: int, figures: SettleFigures) -> settlement.HoldLocked:
    """Lock the attempt's job hold now, with all that its settlement and the job's release will
    read; pass it to `settle` and `release` later in the same transaction."""
    return settlement.hold_lock(
        job_id=figures.job_id,
        operator_id=figures.operator_id,
        submitter_id=figures.submitter_id,
        attempt_id=attempt_id,
        when=figures.leased_at,
        fresh=True,
    )


def settle(
    *,
    attempt_id: int,
    runtime_ms: int,
    charge: bool,
    figures: SettleFigures | None = None,
    locked: settlement.HoldLocked | None = None,
) -> int:
    """Settle one attempt exactly once; returns what was charged (0 when not charged). Pass the
    `figures` already read (the completion's fenced read has them) to read nothing more, and
    the hold `locked` by `hold_lock` if the caller took it.

    Call it only in the transaction that has just ended the attempt (its compare-and-set or
    its row lock won): that is what makes the settlement `fresh`."""
    f = figures or _figures(attempt_id)
    entry = settlement.attempt_settle(
        attempt_id=attempt_id,
        job_id=f.job_id,
        submitter_id=f.submitter_id,
        operator_id=f.operator_id,
        price_per_s_minor=f.price_per_s,
        runtime_ms=runtime_ms,
        timeout_ms=f.timeout_s * 1000,
        charge=charge,
        priced_at=f.leased_at,
        tier=f.tier,
        region=f.region,
        job_kind=f.kind,
        node_id=f.node_id,
        actor="system:settlement",
        fresh=True,
        locked=locked,
    )
    return entry.event.payload["charged_minor"] if entry is not None else 0


def release(
    *,
    job_id: int,
    submitter_id: int | None = None,
    locked: settlement.HoldLocked | None = None,
) -> None:
    if submitter_id is None:
        submitter_id = Job.objects.values_list("submitter_id", flat=True).get(pk=job_id)
    settlement.hold_release(job_id=job_id, submitter_id=submitter_id, actor="system", locked=locked)


def holds_lock(job_ids: set[int], *, releasing_to: set[int]) -> None:
    settlement.holds_lock(job_ids, releasing_to=releasing_to)


def record_outcome(*, node_id: int, success: bool) -> None:
    node_record_outcome(node_id=node_id, success=success, actor="system:jobs")


@dataclass(frozen=True)
class NodePrice:
    """A node's price per second, and the spot market's price it was computed from."""

    per_s: int
    spot_region: str
    spot_tier: str
    spot_seen: int  # the spot row's price; 0 when the market had not priced the pair


# The spot market (region, tier) → (monotonic deadline, (spot price, the row's price or 0)):
# per process.
_spot_cache: dict[tuple[str, str], tuple[float, tuple[int, int]]] = {}


def node_price(node: Node, *, fresh: bool = False) -> NodePrice:
    """max(spot price for the node's region and tier, the node's own floor). The claim is the
    hot path and the market moves once a minute: each process keeps a spot price a few seconds
    (in memory; a shared cache would cost a round trip per claim), and the claim's statement
    checks it is still the market's (jobs/sql/claim_node.sql), reading it `fresh` if not."""
    region, tier = pricing.spot_market(region=node.region, tier=node.tier)
    now = time.monotonic()
    cached = _spot_cache.get((region, tier))
    if fresh or cached is None or cached[0] <= now:
        spot = pricing.spot_price_read(region=region, tier=tier)
        _spot_cache[region, tier] = (now + _PRICE_CACHE_S, spot)
    else:
        spot = cached[1]
    per_s = quotes.node_price(spot_per_s_minor=spot[0], floor_per_s_minor=node.price_floor or 0)
    return NodePrice(per_s, region, tier, spot[1])


# (monotonic deadline, tier → multiplier of the price book in force): per process, like the spot
# prices above. A short TTL rather than invalidation on save: an admin's new book is saved in one
# process and read by every hub process, and a TTL reaches them all with no signal between
# processes; the claim reads this on every call, so it is not read from the database each time.
_tier_cache: dict[str, tuple[float, dict[str, Decimal]]] = {}


def tier_multiplier(tier: str) -> float:
    """The tier's multiplier in the price book in force (1.0 for a tier it does not name)."""
    now = time.monotonic()
    cached = _tier_cache.get("tiers")
    if cached is None or cached[0] <= now:
        cached = (now + _PRICE_CACHE_S, pricing.rules_at().tiers)
        _tier_cache["tiers"] = cached
    return float(cached[1].get(tier, 1))


def known_tiers() -> set[str]:
    from nodes.models import GpuTier

    return set(GpuTier.objects.values_list("slug", flat=True)) | set(pricing.known_tiers())
