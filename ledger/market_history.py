"""The markets' spot prices over a recent window, hour by hour: what the network page charts.

Read from the SpotPriceChanged and SpotBoundsChanged events (the history; SpotPrice is only
the price now) through ledger/sql/spot_history.sql, which returns one row per market and hour
whatever the number of moves, so the cost is bounded by the window's markets × hours.
"""

from collections import defaultdict
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


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def spot_history(*, now: datetime, hours: int) -> list[MarketHistory]:
    """Every market with a price (the markets of countries, and of nodes that named none), with
    its price at the end of each of the last `hours` hours, the current hour last. An hour
    before the market's first move in the window carries the price that move left. Two
    statements: the prices now, and the window's moves."""
    first = _hour(now) - timedelta(hours=hours - 1)
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "spot_history"), {"since": first})
        moves = cursor.fetchall()
    by_market: dict[tuple[str, str], dict[datetime, tuple[int, int]]] = defaultdict(dict)
    for region, tier, hour, closing, opening in moves:
        by_market[(region, tier)][hour] = (opening, closing)
    # Rows keyed by a pricing-zone slug are the markets before regions were countries.
    markets = SpotPrice.objects.filter(Q(region="") | Q(region__regex=CODE_PATTERN)).order_by(
        "tier", "region"
    )
    history = []
    for market in markets:
        moved = by_market.get((market.region, market.tier), {})
        price = moved[min(moved)][0] if moved else market.price_per_s_minor  # before the first move
        hourly = []
        for n in range(hours):
            if (hour := first + timedelta(hours=n)) in moved:
                price = moved[hour][1]
            hourly.append(price)
        history.append(
            MarketHistory(
                region=market.region,
                tier=market.tier,
                price_now=market.price_per_s_minor,
                hourly=hourly,
            )
        )
    return history
