"""The markets' spot prices over a recent window, hour by hour: what the network page charts.

Read from the SpotPriceChanged and SpotBoundsChanged events (the history; SpotPrice is only
the price now) through ledger/sql/spot_history.sql: one index probe per market and hour, so
the cost is bounded by markets × hours, not by how often the prices moved.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Q

from core.regions import CODE_PATTERN
from core.sql import statement
from ledger.models import SpotPrice


@dataclass(frozen=True)
class MarketHistory:
    region: str
    tier: str
    price_now: int  # credit minor units per second
    hourly: list[int]  # the price at the end of each hour of the window, oldest first


def spot_history(*, now: datetime, hours: int) -> list[MarketHistory]:
    """Every market with a price (the markets of countries, and of nodes that named none), with
    its price at the end of each of the last `hours` hours, the current hour last (its price
    now). An hour before the market opened shows the price it opened at. Two statements."""
    last = now.replace(minute=0, second=0, microsecond=0)
    first = last - timedelta(hours=hours - 1)
    # Rows keyed by a pricing-zone slug are the markets before regions were countries.
    markets = list(
        SpotPrice.objects.filter(Q(region="") | Q(region__regex=CODE_PATTERN)).order_by(
            "tier", "region"
        )
    )
    if not markets:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            statement("ledger", "spot_history"),
            {"streams": [m.stream for m in markets], "first": first, "last": last},
        )
        prices: dict[str, dict[datetime, int | None]] = {}
        for stream, hour, price in cursor.fetchall():
            prices.setdefault(stream, {})[hour] = price
    history = []
    for market in markets:
        by_hour = prices.get(market.stream, {})
        hourly = [by_hour.get(first + timedelta(hours=n)) for n in range(hours)]
        opened = next((p for p in hourly if p is not None), market.price_per_s_minor)
        history.append(
            MarketHistory(
                region=market.region,
                tier=market.tier,
                price_now=market.price_per_s_minor,
                hourly=[opened if p is None else p for p in hourly],
            )
        )
    return history
