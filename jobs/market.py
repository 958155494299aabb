"""The market: beat reprices each (region, tier) every minute from supply and demand.

Supply is the idle nodes of a region and tier that may claim (online or degraded, holding no
lease); demand is the queued tasks the best of those nodes could run. More demand than supply
raises the spot price one step; less than half as much lowers it one step; in between it holds.
Every move stays within the bounds an admin set and is a SpotPriceChanged event
(`ledger.pricing.spot_price_set`). A pair moved less than MARKET_MIN_INTERVAL_S ago is left
alone, so a double fire of the beat task moves nothing twice.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, Task, TaskState
from ledger.models import SpotPrice
from ledger.pricing import spot_market, spot_price_get, spot_price_set
from nodes.models import CLAIMABLE_STATES, Node


@dataclass(frozen=True)
class Repriced:
    region: str
    tier: str
    supply: int
    demand: int
    old: int
    new: int


@dataclass
class _Group:
    idle: int = 0
    vram: int = 0
    cc: int = 0
    cores: int = 0
    ram: int = 0
    disk: int = 0
    gpus: int = 0


def _groups() -> dict[tuple[str, str], _Group]:
    busy = Attempt.objects.filter(state__in=ACTIVE_ATTEMPT_STATES).values("node_id")
    rows = (
        Node.objects.filter(state__in=CLAIMABLE_STATES)
        .values("region", "tier")
        .annotate(
            idle=Count("id", filter=~Q(id__in=busy)),
            vram=Max("gpu_vram_mb"),
            cc=Max("compute_capability"),
            cores=Max("cpu_cores"),
            ram=Max("ram_mb"),
            disk=Max("disk_mb"),
            gpus=Max("gpu_count"),
        )
    )
    groups: dict[tuple[str, str], _Group] = defaultdict(_Group)
    for row in rows:
        group = groups[spot_market(region=row["region"], tier=row["tier"])]
        group.idle += row["idle"]
        for name in ("vram", "cc", "cores", "ram", "disk", "gpus"):
            setattr(group, name, max(getattr(group, name), row[name] or 0))
    return groups


def _demand(region: str, tier: str, group: _Group) -> int:
    return (
        Task.objects.filter(
            state=TaskState.QUEUED,
            min_vram_mb__lte=group.vram,
            cpu_cores__lte=group.cores,
            ram_mb__lte=group.ram,
            disk_mb__lte=group.disk,
            gpu_count__lte=group.gpus,
            min_compute_capability__lte=group.cc,
        )
        .filter(Q(tier_allow=[]) | Q(tier_allow__contains=[tier]))
        .filter(Q(region="") | Q(region=region))
        .count()
    )


def _target(price: int, supply: int, demand: int) -> int:
    step = settings.MARKET_STEP_PCT
    if demand > supply:
        return price * (100 + step) // 100 or 1
    if demand * 2 < supply:
        return max(1, price * (100 - step) // 100)
    return price


def market_reprice(*, now: datetime | None = None) -> list[Repriced]:
    now = now or timezone.now()
    settled_before = now - timedelta(seconds=settings.MARKET_MIN_INTERVAL_S)
    moved = []
    for (region, tier), group in sorted(_groups().items()):
        demand = _demand(region, tier, group)
        with transaction.atomic():
            row = SpotPrice.objects.select_for_update().filter(region=region, tier=tier).first()
            if row is not None and row.updated_at > settled_before:
                continue
            old = row.price_per_s_minor if row else spot_price_get(region=region, tier=tier)
            target = _target(old, group.idle, demand)
            if target == old:
                continue
            if row is None:  # the first move of a pair creates its row (and default bounds)
                row = spot_price_set(
                    region=region, tier=tier, price=old, reason="opened", actor="system:market"
                )
            new = row.clamp(target)
            if new == old:
                continue
            spot_price_set(
                region=region,
                tier=tier,
                price=new,
                actor="system:market",
                reason=f"supply {group.idle} idle node(s), demand {demand} queued task(s)",
            )
        moved.append(Repriced(region, tier, group.idle, demand, old, new))
    return moved
