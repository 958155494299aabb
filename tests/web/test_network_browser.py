"""The network page in a real browser (Playwright driving Debian's Chromium) against the live
hub, with a pool behind it: nodes online in three countries and two tiers, a verified job that
ran on two operators' nodes, and markets whose prices moved in the last hours. An operator
chooses to be named on the leaderboard from his account and finds his name there; a stranger
reads the same page, on a desktop and on a phone. Screenshots go to var/screenshots/."""

from datetime import timedelta

import pytest
import time_machine
from django.core.cache import cache
from django.utils import timezone

from ledger.pricing import spot_bounds_set, spot_price_set
from tests.conftest import _user, client_with_key, key_for
from tests.jobs.conftest import CREDITS, fund, online_node
from tests.jobs.test_verification import RIGHT, finish, take, verified_job
from tests.web.conftest import PASSWORD
from tests.web.test_browser import log_in
from web.network import LEADERBOARD_KEY

pytestmark = pytest.mark.django_db(transaction=True)


def _pool(alice, bob) -> None:
    cache.delete(LEADERBOARD_KEY)  # the cache outlives the database: an earlier run's board
    olga = _user("olga", ["operator"])
    _, bob_agent = online_node(bob, name="bob-1", region="IN")
    online_node(bob, name="bob-cpu", region="IN", gpus=[])
    _, olga_agent = online_node(olga, name="olga-1", region="DE")
    online_node(olga, name="olga-cpu", region="US", gpus=[])
    fund(alice, 1_000 * CREDITS)
    verified_job(client_with_key(key_for(alice, "submitter")), slices=1)
    first, second = take(bob_agent), take(olga_agent)
    finish(bob_agent, first, RIGHT)
    finish(olga_agent, second, RIGHT)
    now = timezone.now()
    markets = (("IN", "rtx-4090"), ("DE", "rtx-4090"), ("IN", "cpu"), ("US", "cpu"))
    with time_machine.travel(now - timedelta(hours=30), tick=False):
        for region, tier in markets:
            spot_bounds_set(
                region=region, tier=tier, min_price=1, max_price=100_000, actor="t", reason="t"
            )
    for hours_ago, price in ((20, 400), (12, 650), (5, 520), (2, 580)):
        with time_machine.travel(now - timedelta(hours=hours_ago), tick=False):
            spot_price_set(region="IN", tier="rtx-4090", price=price, reason="t", actor="t")
            spot_price_set(region="DE", tier="rtx-4090", price=price + 90, reason="t", actor="t")
            spot_price_set(region="US", tier="cpu", price=price // 10, reason="t", actor="t")


def test_the_network_page_shows_the_pool_and_the_names_operators_chose(
    alice, bob, page, live_server, shot
):
    _pool(alice, bob)
    log_in(page, "bob", PASSWORD)
    page.get_by_label("Show my name on the public leaderboard").check()
    page.get_by_label("Name to show").fill("Bob's Rigs")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/account/")
    assert "The leaderboard shows you as Bob's Rigs." in page.content()
    page.get_by_role("link", name="Network", exact=True).click()
    page.wait_for_url("**/network/")
    assert page.locator("#nodes-online .amount").inner_text() == "4"
    assert page.locator("#jobs-finished .amount").inner_text() == "1"
    assert page.locator("#region-IN th").inner_text().startswith("India")
    assert page.locator("#spot-prices polyline").count() == 4
    assert "5.80 credits/s" in page.locator("#prices-rtx-4090").inner_text()
    rows = page.locator("#leaderboard tbody tr")
    assert rows.count() == 2
    assert "Bob's Rigs" in rows.all_inner_texts()[0] + rows.all_inner_texts()[1]
    assert "anonymous operator" in page.locator("#leaderboard").inner_text()
    shot(page, "network")

    page.get_by_role("button", name="Log out bob").click()
    page.goto("/network/")
    assert "Bob's Rigs" in page.locator("#leaderboard").inner_text()
    assert "bob" not in page.locator("#leaderboard").inner_text()
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "network-phone")
