from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.market import market_reprice
from ledger.models import Event, SpotPrice
from ledger.pricing import spot_bounds_set, spot_price_get
from tests.jobs.conftest import claim, job_body, online_node

pytestmark = pytest.mark.django_db


def later(minutes: int = 2):
    return timezone.now() + timedelta(minutes=minutes)


def test_demand_above_supply_raises_the_price_one_step(submitter, bob):
    online_node(bob, region="IN")
    start = spot_price_get(region="IN", tier="rtx-4090")
    submitter.post("/api/v1/jobs/", job_body(slices=5), format="json")
    (moved,) = market_reprice()
    assert (moved.region, moved.tier, moved.supply, moved.demand) == ("IN", "rtx-4090", 1, 5)
    assert moved.new == start * 110 // 100
    assert spot_price_get(region="IN", tier="rtx-4090") == moved.new
    event = Event.objects.filter(type="SpotPriceChanged").latest("id")
    assert event.payload["price_per_s_minor"] == moved.new
    assert "demand 5" in event.payload["reason"]


def test_a_double_fire_moves_nothing_twice(submitter, bob):
    online_node(bob)
    submitter.post("/api/v1/jobs/", job_body(slices=5), format="json")
    assert len(market_reprice()) == 1
    assert market_reprice() == []
    assert len(market_reprice(now=later())) == 1  # the next minute moves it again


def test_idle_supply_lowers_the_price_and_busy_nodes_are_not_supply(submitter, bob):
    for i in range(3):
        online_node(bob, name=f"rig-{i}")
    start = spot_price_get(region="IN", tier="rtx-4090")
    (moved,) = market_reprice()
    assert moved.supply == 3 and moved.demand == 0 and moved.new == start * 90 // 100
    submitter.post("/api/v1/jobs/", job_body(slices=2), format="json")
    _, agent = online_node(bob, name="busy")
    claim(agent)
    (moved,) = market_reprice(now=later())
    assert moved.supply == 3 and moved.demand == 1


def test_the_market_stays_within_the_admins_bounds(submitter, bob):
    online_node(bob)
    start = spot_price_get(region="IN", tier="rtx-4090")
    spot_bounds_set(
        region="IN", tier="rtx-4090", min_price=start, max_price=start + 3, actor="test"
    )
    job = submitter.post("/api/v1/jobs/", job_body(slices=20, price_ceiling=200), format="json")
    assert job.status_code == 201, job.json()
    market_reprice()
    market_reprice(now=later(2))
    assert SpotPrice.objects.get(region="IN", tier="rtx-4090").price_per_s_minor == start + 3


def test_nothing_moves_without_nodes(submitter):
    submitter.post("/api/v1/jobs/", job_body(slices=5), format="json")
    assert market_reprice() == []
