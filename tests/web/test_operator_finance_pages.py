"""An operator and finance in a real browser (Playwright driving Debian's Chromium) against the
live hub: the operator sees their node at work and their earnings and asks for a cashout;
finance approves it, pays it and exports it, and finds it in the export's CSV; another operator
sees none of it. Every page visited is saved under var/screenshots/."""

import csv
import io
import re
from pathlib import Path

import pytest

from ledger.display import credits
from ledger.models_cashouts import Cashout, CashoutStatus
from people.services import user_create
from tests.web.conftest import PASSWORD
from tests.web.helpers_operator import min_cashout_minor, with_earnings, working_node

pytestmark = pytest.mark.django_db(transaction=True)


def person(name: str, roles: list[str]):
    return user_create(username=name, roles=roles, email=f"{name}@example.test", password=PASSWORD)


def log_in(page, username: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account/")


def log_out(page, username: str) -> None:
    page.get_by_role("button", name=f"Log out {username}").click()
    page.wait_for_url("**/")


def fits_the_screen(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_an_operator_cashes_out_and_finance_pays_and_exports_it(page, live_server, shot):
    alice, bob = person("alice", ["submitter"]), person("bob", ["operator"])
    person("carol", ["finance"])
    person("otto", ["operator"])
    work = working_node(alice, bob, progress=40)
    minimum = min_cashout_minor()
    with_earnings(alice, bob, 3 * minimum)

    # The operator: the node at work, its page, the earnings, a cashout.
    log_in(page, "bob")
    page.get_by_role("link", name="Nodes").click()
    page.wait_for_url("**/nodes/")
    row = page.locator(f"#node-{work.node.pk}")
    assert "bob-rig" in row.inner_text() and "40%" in row.inner_text()
    assert row.locator("progress").get_attribute("value") == "40"
    shot(page, "operator-nodes")
    row.get_by_role("link", name="bob-rig").click()
    page.wait_for_url(f"**/nodes/{work.node.pk}/")
    assert f"task {work.task_id}" in page.locator("#node-work").inner_text()
    page.get_by_label("Price floor (credits per second)").fill("0.75")
    page.get_by_role("button", name="Set the floor").click()
    page.wait_for_selector("text=The price floor of bob-rig is set.")
    assert page.get_by_label("Price floor (credits per second)").input_value() == "0.75"
    shot(page, "operator-node")

    page.goto("/nodes/add/")
    page.get_by_label("Name").fill("den-pc")
    page.get_by_label("Region").fill("IN")
    page.get_by_role("button", name="Make the command").click()
    command = page.locator("#register-command").inner_text()
    assert re.match(
        rf"computepool-agent register --hub {re.escape(live_server.url)} --token cpk_\S+ "
        r"--name den-pc --region IN$",
        command,
    ), command
    shot(page, "operator-add-machine")

    page.get_by_role("link", name="Earnings").click()
    page.wait_for_url("**/earnings/")
    assert page.locator("#earned-today .amount").inner_text() == credits(3 * minimum)
    assert page.locator("#chart rect").count() == 30
    shot(page, "operator-earnings")
    page.get_by_role("link", name="Cash out").click()
    page.wait_for_url("**/earnings/cashout/")
    assert page.locator("#cashout-minimum .amount").inner_text() == credits(minimum)
    assert page.locator("#cashout-available .amount").inner_text() == credits(3 * minimum)
    page.get_by_label("Amount (credits)").fill(f"{(minimum - 100) / 100:.2f}")
    page.get_by_label("UPI id").fill("bob@okbank")
    page.get_by_role("button", name="Ask for the cashout").click()
    assert "the minimum cashout is" in page.locator("#cashout-form .errors").first.inner_text()
    shot(page, "operator-cashout-refused")
    page.get_by_label("Amount (credits)").fill(f"{minimum / 100:.2f}")
    page.get_by_label("UPI id").fill("bob@okbank")
    page.get_by_role("button", name="Ask for the cashout").click()
    page.wait_for_url("**/earnings/")
    cashout = Cashout.objects.get(operator=bob)
    assert "requested" in page.locator(f"#cashout-{cashout.pk}").inner_text()
    shot(page, "operator-cashout-requested")
    page.set_viewport_size({"width": 390, "height": 844})
    assert fits_the_screen(page)
    shot(page, "operator-earnings-phone")
    page.goto("/nodes/")
    assert fits_the_screen(page)
    shot(page, "operator-nodes-phone")
    page.set_viewport_size({"width": 1100, "height": 800})
    log_out(page, "bob")

    # Finance: approve, pay, export, and find it in the CSV.
    log_in(page, "carol")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cashouts").click()
    page.wait_for_url("**/finance/cashouts/")
    queued = page.locator(f"#cashout-{cashout.pk}")
    assert "bob" in queued.inner_text() and "bob@okbank" in queued.inner_text()
    shot(page, "finance-cashouts")
    queued.get_by_role("button", name=f"Approve cashout {cashout.pk}").click()
    page.wait_for_selector(f"text=Cashout {cashout.pk} approved.")
    page.get_by_role("link", name="approved").click()
    approved = page.locator(f"#cashout-{cashout.pk}")
    approved.get_by_label("Payout reference").fill("UTR-2026-0001")
    approved.get_by_role("button", name=f"Mark cashout {cashout.pk} paid").click()
    page.wait_for_selector(f"text=Cashout {cashout.pk} marked paid.")
    cashout.refresh_from_db()
    assert cashout.status == CashoutStatus.PAID and cashout.payout_reference == "UTR-2026-0001"
    page.get_by_role("link", name="paid", exact=True).click()
    assert "UTR-2026-0001" in page.locator(f"#cashout-{cashout.pk}").inner_text()
    shot(page, "finance-cashout-paid")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Exports").click()
    page.wait_for_url("**/finance/exports/")
    page.get_by_role("button", name="Make the export").click()
    page.wait_for_url("**/finance/exports/*/")
    line = page.locator(f"#line-cashout-{cashout.pk}")
    assert "bob" in line.inner_text() and credits(minimum) in line.inner_text()
    shot(page, "finance-export")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the CSV").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [(r["cashout_id"], r["operator"]) for r in rows] == [(str(cashout.pk), "bob")]
    with page.expect_download() as head:
        page.get_by_role("link", name="Download the head").click()
    assert page.locator("#export-sha256").inner_text() in Path(head.value.path()).read_text()

    page.get_by_role("link", name="Statements").click()
    page.get_by_label("Person (username)").fill("bob")
    page.get_by_role("button", name="Show the statement").click()
    assert f"user:{bob.pk}:earnings" in page.locator("#statement-accounts").inner_text()
    shot(page, "finance-statement")
    log_out(page, "carol")

    # Another operator sees none of it.
    log_in(page, "otto")
    page.goto("/nodes/")
    assert "bob-rig" not in page.content()
    assert page.goto(f"/nodes/{work.node.pk}/").status == 404
    assert page.goto("/finance/cashouts/").status == 403
    page.goto("/earnings/")
    assert page.locator(f"#cashout-{cashout.pk}").count() == 0
