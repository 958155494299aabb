"""The network page: the pool as anyone may see it, signed in or not.

Online nodes by region and tier, jobs finished today, each market's spot price with its last
24 hours, and the operators who delivered the most verified compute. Every figure is one
statement, a GROUP BY or an index probe per market and hour (nodes.selectors, jobs.selectors,
ledger.market_history), so the page sends
the same few statements for ten nodes or ten thousand. Only the leaderboard is cached (for
LEADERBOARD_CACHE_S): it sums every agreed attempt there has ever been, a cost that grows with
the pool's history, while its order moves by hours of compute; the rest reads indexes sized by
what is online now and stays live. Names come from the operators' own opt-in
(people.PublicProfile), read after the cache, so turning it on or off shows at once.
"""

from dataclasses import dataclass
from datetime import UTC

import pycountry
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from jobs.selectors import VerifiedCompute, jobs_finished_since, verified_compute_by_operator
from ledger.market_history import MarketHistory, spot_history
from nodes.models import GpuTier
from nodes.selectors import nodes_online_by_market
from people.models import PublicProfile
from web.ratelimit import spend, too_many

HISTORY_HOURS = 24
LEADERBOARD_SIZE = 20
LEADERBOARD_CACHE_S = 60
LEADERBOARD_KEY = "web:network:leaderboard"
CHART_WIDTH = 240  # ten units an hour
CHART_HEIGHT = 80
SERIES_STYLES = 6  # web.css colours series-0 … series-5


def region_name(code: str) -> str:
    if not code:
        return "No country given"
    country = pycountry.countries.get(alpha_2=code)
    return country.name if country else code


@dataclass(frozen=True)
class Series:
    region: str
    name: str
    price_now: int
    points: str  # an SVG polyline's points
    style: int


@dataclass(frozen=True)
class TierPrices:
    tier: str
    label: str
    series: list[Series]
    low: int
    high: int


def _points(hourly: list[int], low: int, high: int) -> str:
    """A stepped line: each hour's price held across its width, scaled so low..high fills the
    chart (a flat market draws mid-height)."""
    pitch = CHART_WIDTH // len(hourly)
    coords = []
    for n, price in enumerate(hourly):
        y = CHART_HEIGHT // 2 if high == low else (high - price) * CHART_HEIGHT // (high - low)
        coords += [f"{n * pitch},{y}", f"{(n + 1) * pitch},{y}"]
    return " ".join(coords)


def tier_prices(history: list[MarketHistory], labels: dict[str, str]) -> list[TierPrices]:
    """The markets grouped by tier, in the tier table's order, each tier's chart on its own
    scale."""
    by_tier: dict[str, list[MarketHistory]] = {}
    for market in history:
        by_tier.setdefault(market.tier, []).append(market)
    order = {slug: n for n, slug in enumerate(labels)}
    tiers = []
    for tier in sorted(by_tier, key=lambda t: (order.get(t, len(order)), t)):
        markets = by_tier[tier]
        low = min(min(m.hourly) for m in markets)
        high = max(max(m.hourly) for m in markets)
        series = [
            Series(
                region=m.region,
                name=region_name(m.region),
                price_now=m.price_now,
                points=_points(m.hourly, low, high),
                style=n % SERIES_STYLES,
            )
            for n, m in enumerate(markets)
        ]
        tiers.append(
            TierPrices(tier=tier, label=labels.get(tier, tier), series=series, low=low, high=high)
        )
    return tiers


def online_grid(counts: dict[tuple[str, str], int], labels: dict[str, str]) -> dict[str, object]:
    """Regions as rows (most nodes first), tiers as columns (the tier table's order)."""
    by_region: dict[str, dict[str, int]] = {}
    for (region, tier), count in counts.items():
        by_region.setdefault(region, {})[tier] = count
    order = {slug: n for n, slug in enumerate(labels)}
    tiers = sorted({tier for _, tier in counts}, key=lambda t: (order.get(t, len(order)), t))
    rows = [
        {
            "region": region,
            "name": region_name(region),
            "cells": [tiers_of.get(tier, 0) for tier in tiers],
            "total": sum(tiers_of.values()),
        }
        for region, tiers_of in by_region.items()
    ]
    rows.sort(key=lambda row: (-row["total"], row["name"]))
    return {
        "tiers": [{"slug": t, "label": labels.get(t, t)} for t in tiers],
        "rows": rows,
        "totals": [sum(row["cells"][n] for row in rows) for n in range(len(tiers))],
        "total": sum(counts.values()),
    }


@dataclass(frozen=True)
class Leader:
    rank: int
    name: str | None  # None: the operator has not opted in
    hours: float
    results: int

    @property
    def compute(self) -> str:
        """Hours to the tenth, or minutes or seconds for a newcomer's first results."""
        seconds = self.hours * 3600
        if seconds >= 3600:
            return f"{self.hours:,.1f} h"
        if seconds >= 60:
            return f"{seconds / 60:.0f} min"
        return f"{seconds:.1f} s"


def leaderboard() -> list[Leader]:
    top: list[VerifiedCompute] | None = cache.get(LEADERBOARD_KEY)
    if top is None:
        top = verified_compute_by_operator(limit=LEADERBOARD_SIZE)
        cache.set(LEADERBOARD_KEY, top, LEADERBOARD_CACHE_S)
    names = dict(
        PublicProfile.objects.filter(
            user_id__in=[row.operator_id for row in top], show_name=True
        ).values_list("user_id", "public_name")
    )
    return [
        Leader(
            rank=n + 1,
            name=names.get(row.operator_id),
            hours=row.runtime_ms / 3_600_000,
            results=row.results,
        )
        for n, row in enumerate(top)
    ]


class NetworkPage(View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        if wait := spend(request, "network_page"):
            return too_many(request, wait)
        now = timezone.now()
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        labels = dict(GpuTier.objects.values_list("slug", "label"))  # in rank order
        context = {
            "online": online_grid(nodes_online_by_market(), labels),
            "finished": jobs_finished_since(midnight),
            "tiers": tier_prices(spot_history(now=now, hours=HISTORY_HOURS), labels),
            "history_hours": HISTORY_HOURS,
            "chart_width": CHART_WIDTH,
            "chart_height": CHART_HEIGHT,
            "leaders": leaderboard(),
            "now": now,
            "midnight": midnight,
        }
        return render(request, "web/network.html", context)
