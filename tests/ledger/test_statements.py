"""Statements: a person's own earnings and spending over a period, as JSON or CSV."""

import csv
import io
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from ledger.cashouts import cashout_mark_paid
from ledger.settlement import hold_release
from tests.ledger.economy_helpers import approved_cashout, grant, hold, settle

pytestmark = pytest.mark.usefixtures("price_books")


@pytest.fixture
def month(alice, bob):
    grant(alice, 10_000_000)
    hold(alice, 1, 9_000_000)
    settle(
        alice, bob, job_id=1, attempt_id=1, price=1000, runtime_ms=7_000_000, timeout_ms=7_200_000
    )  # costs 7,000,000
    with transaction.atomic():
        hold_release(job_id=1, submitter_id=alice.pk, actor="jobs")
    cashout = approved_cashout(bob, 5_000_000)
    cashout_mark_paid(cashout_id=cashout.pk, payout_reference="UTR-1", actor="user:carol")
    now = timezone.now()
    return {
        "from": (now - timedelta(days=1)).isoformat(),
        "to": (now + timedelta(days=1)).isoformat(),
    }


def test_a_submitter_sees_their_spending(api, alice, month):
    body = api(alice, "submitter").get("/api/v1/statements/me", month).json()
    assert body["totals"]["topped_up"] == 10_000_000
    assert body["totals"]["held"] == 9_000_000
    assert body["totals"]["spent"] == 7_000_000
    assert body["totals"]["released"] == 2_000_000
    assert body["totals"]["earned"] == 0
    closing = {a["code"]: a["closing_minor"] for a in body["accounts"]}
    assert closing[f"user:{alice.pk}:available"] == 3_000_000
    assert [line["kind"] for line in body["lines"]] == [
        "topup",
        "hold",
        "hold",
        "settlement",
        "release",
        "release",
    ]
    assert body["lines"][3]["ref"] == "attempt:1"


def test_an_operator_sees_their_earnings_and_payouts_only(api, alice, bob, month):
    body = api(bob, "operator").get("/api/v1/statements/me", month).json()
    assert body["totals"]["earned"] == 5_600_000  # 7,000,000 less the 20% fee
    assert body["totals"]["paid_out"] == 5_000_000
    assert body["totals"]["spent"] == 0 and body["totals"]["topped_up"] == 0
    codes = {line["account"] for line in body["lines"]}
    assert codes == {f"user:{bob.pk}:earnings", f"user:{bob.pk}:cashout"}
    assert all(str(alice.pk) not in a["code"].split(":")[1] for a in body["accounts"])


def test_the_statement_pages_and_windows_by_time(api, alice, month):
    client = api(alice, "submitter")
    page = client.get("/api/v1/statements/me", {**month, "limit": 4}).json()
    assert len(page["lines"]) == 4 and page["next_after"] == page["lines"][-1]["posting_id"]
    rest = client.get("/api/v1/statements/me", {**month, "after": page["next_after"]}).json()
    assert len(rest["lines"]) == 2 and rest["next_after"] is None
    past = {"from": "2020-01-01T00:00:00Z", "to": "2020-02-01T00:00:00Z"}
    empty = client.get("/api/v1/statements/me", past).json()
    assert empty["lines"] == [] and empty["totals"]["spent"] == 0
    assert (
        client.get("/api/v1/statements/me", {"from": month["to"], "to": month["from"]}).status_code
        == 400
    )
    assert client.get("/api/v1/statements/me").status_code == 400


def test_the_statement_comes_as_csv(api, alice, month):
    response = api(alice, "submitter").get("/api/v1/statements/me", {**month, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 6
    assert rows[3]["kind"] == "settlement" and rows[3]["amount_minor"] == "-7000000"
    assert rows[3]["credits"] == "-70000.00"


def test_a_csv_statement_asked_without_its_period_is_a_json_400(api, alice):
    response = api(alice, "submitter").get("/api/v1/statements/me", {"format": "csv"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "invalid"
    assert {"from", "to"} <= set(response.json()["fields"])


def test_a_statement_needs_a_person(client, month):
    assert client.get("/api/v1/statements/me", month).status_code in (401, 403)
