"""Cashouts: reserved at request, approved, paid (money leaves) or rejected (money returns)."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from ledger.accounts import PAYOUTS, REVENUE, cashout_code, earnings_code
from ledger.cashouts import (
    CashoutConflict,
    cashout_approve,
    cashout_mark_paid,
    cashout_reject,
    payout_details_clean,
)
from ledger.economy_projection import economy_invariants
from ledger.errors import IdempotencyConflict, InsufficientFunds
from ledger.models import Account, Cashout, Event, PriceBook
from ledger.pricing import price_book_copy
from ledger.services import account_balance
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import UPI, approved_cashout, balance, earn, request_cashout

pytestmark = pytest.mark.usefixtures("price_books")

MIN = 5_000_000  # ₹500 at 1 paisa per credit, in minor units
BANK = {
    "method": "bank",
    "account_name": "Bob Operator",
    "account_number": "001234567890",
    "ifsc": "hdfc0001234",
}


def derived(code: str) -> int:
    account = Account.objects.filter(code=code).first()
    return account_balance(account) if account else 0


def test_a_request_reserves_the_amount_at_once(alice, bob):
    earn(alice, bob, 6_000_000)
    cashout = request_cashout(bob, MIN)
    assert (cashout.status, cashout.inr_paise, cashout.fee_minor) == ("requested", 50_000, 0)
    assert balance(earnings_code(bob.pk)) == 1_000_000
    assert balance(cashout_code(bob.pk)) == MIN
    event = Event.objects.get(stream=f"cashout:{cashout.pk}")
    assert event.type == "CashoutRequested"
    assert "bob@okbank" not in str(event.payload)  # payout details stay off the permanent log
    assert verify_ledger().ok


def test_a_request_must_reach_the_minimum_and_stay_within_earnings(alice, bob):
    earn(alice, bob, 6_000_000)
    with pytest.raises(DomainError, match=r"minimum cashout is ₹500\.00"):
        request_cashout(bob, MIN - 100)
    with pytest.raises(InsufficientFunds, match=r"60000\.00 in earnings"):
        request_cashout(bob, 6_000_100)
    with pytest.raises(DomainError, match="whole paise"):
        request_cashout(bob, MIN + 1)
    with pytest.raises(DomainError):
        request_cashout(bob, -MIN)
    assert not Cashout.objects.exists() and balance(earnings_code(bob.pk)) == 6_000_000


@pytest.mark.parametrize(
    "details",
    [
        {},
        {"method": "cash"},
        {"method": "upi", "vpa": "no-at-sign"},
        {"method": "upi", "vpa": "bob@okbank", "pin": "1234"},
        {**BANK, "ifsc": "HDFC1234"},
        {**BANK, "account_number": "12ab"},
        "bob@okbank",
    ],
)
def test_payout_details_are_validated(details):
    with pytest.raises(DomainError):
        payout_details_clean(details)


def test_payout_details_are_normalised():
    assert payout_details_clean(BANK)["ifsc"] == "HDFC0001234"
    assert payout_details_clean({"method": "upi", "vpa": " bob@okbank "}) == UPI


def test_approve_then_pay_sends_the_money_out_and_never_creates_any(alice, bob):
    earn(alice, bob, MIN)
    cashout = approved_cashout(bob, MIN)
    assert cashout.status == "approved" and cashout.approved_at is not None
    paid = cashout_mark_paid(cashout_id=cashout.pk, payout_reference="UTR-1", actor="user:carol")
    assert paid.status == "paid" and paid.payout_reference == "UTR-1"
    assert balance(cashout_code(bob.pk)) == 0 and balance(earnings_code(bob.pk)) == 0
    assert derived(PAYOUTS) == MIN
    # Idempotent: paying again with the same reference changes nothing.
    again = cashout_mark_paid(cashout_id=cashout.pk, payout_reference="UTR-1", actor="user:carol")
    assert again.version == paid.version and derived(PAYOUTS) == MIN
    with pytest.raises(CashoutConflict, match="already paid"):
        cashout_mark_paid(cashout_id=cashout.pk, payout_reference="UTR-2", actor="user:carol")
    types = list(
        Event.objects.filter(stream=f"cashout:{cashout.pk}")
        .order_by("version")
        .values_list("type", flat=True)
    )
    assert types == ["CashoutRequested", "CashoutApproved", "CashoutPaid"]
    assert verify_ledger().ok


def test_reject_returns_the_reserved_credits(alice, bob):
    earn(alice, bob, MIN * 2)
    first = request_cashout(bob, MIN)
    second = approved_cashout(bob, MIN)
    cashout_reject(cashout_id=first.pk, reason="name mismatch", actor="user:carol")
    rejected = cashout_reject(cashout_id=second.pk, reason="bank bounced", actor="user:carol")
    assert rejected.status == "rejected" and rejected.reason == "bank bounced"
    assert balance(earnings_code(bob.pk)) == MIN * 2 and balance(cashout_code(bob.pk)) == 0
    assert cashout_reject(cashout_id=first.pk, reason="again", actor="x").version == 2
    with pytest.raises(DomainError, match="reason"):
        cashout_reject(cashout_id=first.pk, reason="  ", actor="x")
    assert verify_ledger().ok


def test_transitions_that_make_no_sense_are_conflicts(alice, bob):
    earn(alice, bob, MIN * 2)
    requested = request_cashout(bob, MIN)
    with pytest.raises(CashoutConflict, match="before it is approved"):
        cashout_mark_paid(cashout_id=requested.pk, payout_reference="UTR-9", actor="x")
    paid = approved_cashout(bob, MIN)
    cashout_mark_paid(cashout_id=paid.pk, payout_reference="UTR-9", actor="x")
    with pytest.raises(CashoutConflict):
        cashout_reject(cashout_id=paid.pk, reason="late", actor="x")
    cashout_reject(cashout_id=requested.pk, reason="no", actor="x")
    with pytest.raises(CashoutConflict):
        cashout_approve(cashout_id=requested.pk, actor="x")
    assert cashout_approve(cashout_id=paid.pk, actor="x").status == "paid"  # no-op


def test_one_payout_reference_pays_one_cashout(alice, bob):
    earn(alice, bob, MIN * 2)
    first, second = approved_cashout(bob, MIN), approved_cashout(bob, MIN)
    cashout_mark_paid(cashout_id=first.pk, payout_reference="UTR-7", actor="x")
    with pytest.raises(CashoutConflict, match="already paid another"):
        cashout_mark_paid(cashout_id=second.pk, payout_reference="UTR-7", actor="x")
    assert Cashout.objects.get(pk=second.pk).status == "approved"


def test_a_retried_request_with_its_key_returns_the_original(alice, bob):
    earn(alice, bob, MIN * 3)
    first = request_cashout(bob, MIN, idempotency_key="abc")
    again = request_cashout(bob, MIN, idempotency_key="abc")
    assert first.pk == again.pk and balance(earnings_code(bob.pk)) == MIN * 2
    with pytest.raises(IdempotencyConflict):
        request_cashout(bob, MIN * 2, idempotency_key="abc")


def test_a_cashout_fee_goes_to_the_platform_and_the_rest_leaves(alice, bob):
    newer = price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(seconds=1),
    )
    PriceBook.objects.filter(pk=newer.pk).update(cashout_fee_bps=150, effective_from=timezone.now())
    earn(alice, bob, MIN)
    revenue_before = derived(REVENUE)
    cashout = approved_cashout(bob, MIN)
    assert (cashout.fee_minor, cashout.inr_paise) == (75_000, 49_250)  # 1.5%, ₹492.50 paid out
    cashout_mark_paid(cashout_id=cashout.pk, payout_reference="UTR-F", actor="x")
    assert derived(PAYOUTS) == MIN - 75_000
    assert derived(REVENUE) - revenue_before == 75_000
    assert verify_ledger().ok


# --- API ----------------------------------------------------------------------------------


def test_an_operator_asks_and_sees_only_their_own(api, alice, bob, mallory):
    earn(alice, bob, MIN)
    earn(alice, mallory, MIN, job_id=9001)
    bobs = api(bob, "operator")
    response = bobs.post(
        "/api/v1/cashouts/", {"amount_minor": MIN, "payout_details": UPI}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["inr"] == "500.00"
    cashout_id = response.json()["id"]
    request_cashout(mallory, MIN)
    listed = bobs.get("/api/v1/cashouts/").json()["results"]
    assert [c["id"] for c in listed] == [cashout_id]
    malloryc = api(mallory, "operator")
    assert malloryc.get(f"/api/v1/cashouts/{cashout_id}").status_code == 404
    assert bobs.get(f"/api/v1/cashouts/{cashout_id}").status_code == 200
    assert malloryc.post(f"/api/v1/cashouts/{cashout_id}/approve").status_code == 403
    assert api(alice, "submitter").get("/api/v1/cashouts/").status_code == 403


def test_the_api_says_why_a_request_is_refused(api, alice, bob):
    earn(alice, bob, MIN)
    bobs = api(bob, "operator")
    small = bobs.post(
        "/api/v1/cashouts/", {"amount_minor": 100, "payout_details": UPI}, format="json"
    )
    assert small.status_code == 400 and "amount_minor" in small.json()["fields"]
    broke = bobs.post(
        "/api/v1/cashouts/", {"amount_minor": MIN * 9, "payout_details": UPI}, format="json"
    )
    assert broke.status_code == 402 and broke.json()["error"] == "insufficient_funds"
    details = bobs.post(
        "/api/v1/cashouts/",
        {"amount_minor": MIN, "payout_details": {"method": "upi"}},
        format="json",
    )
    assert details.status_code == 400 and "payout_details.vpa" in details.json()["fields"]
    assert not Cashout.objects.exists()


def test_finance_approves_rejects_and_pays_through_the_api(api, alice, bob, carol):
    earn(alice, bob, MIN * 2)
    one, two = request_cashout(bob, MIN), request_cashout(bob, MIN)
    finance = api(carol, "finance")
    assert finance.get("/api/v1/cashouts/?status=requested").json()["results"][0]["id"] == two.pk
    approved = finance.post(f"/api/v1/cashouts/{one.pk}/approve")
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    paid = finance.post(f"/api/v1/cashouts/{one.pk}/paid", {"payout_reference": "UTR-55"})
    assert paid.status_code == 200 and paid.json()["payout_reference"] == "UTR-55"
    no_reason = finance.post(f"/api/v1/cashouts/{two.pk}/reject", {})
    assert no_reason.status_code == 400
    rejected = finance.post(f"/api/v1/cashouts/{two.pk}/reject", {"reason": "duplicate"})
    assert rejected.json()["status"] == "rejected"
    late = finance.post(f"/api/v1/cashouts/{one.pk}/reject", {"reason": "oops"})
    assert late.status_code == 409 and late.json()["error"] == "cashout_state"
    assert finance.post("/api/v1/cashouts/99999/approve").status_code == 404
    assert verify_ledger().ok


def test_the_admin_actions_go_through_the_services(client, alice, bob, dave):
    earn(alice, bob, MIN * 2)
    one, two = request_cashout(bob, MIN), request_cashout(bob, MIN)
    client.force_login(dave)
    url = "/admin/ledger/cashout/"
    client.post(url, {"action": "approve", "_selected_action": [one.pk, two.pk], "text": ""})
    assert set(Cashout.objects.values_list("status", flat=True)) == {"approved"}
    client.post(url, {"action": "mark_paid", "_selected_action": [one.pk], "text": "UTR-A"})
    client.post(url, {"action": "reject", "_selected_action": [two.pk], "text": "bounced"})
    assert dict(Cashout.objects.values_list("pk", "status")) == {one.pk: "paid", two.pk: "rejected"}
    assert Event.objects.filter(type="CashoutPaid", actor=f"user:{dave.pk}").exists()
    assert client.get(url).status_code == 200
    assert client.get(f"{url}{one.pk}/change/").status_code == 200
    assert verify_ledger().ok


def test_verify_notices_a_cashout_row_changed_behind_the_log(alice, bob):
    earn(alice, bob, MIN)
    cashout = request_cashout(bob, MIN)
    with transaction.atomic():
        Cashout.objects.filter(pk=cashout.pk).update(status="approved")
        Cashout.objects.filter(pk=cashout.pk).update(
            payout_details={"method": "upi", "vpa": "eve@evil"}
        )
    problems = verify_ledger().problems
    assert any(f"cashout {cashout.pk} status" in p for p in problems), problems
    assert any("payout details were changed" in p for p in problems), problems


def test_the_invariants_notice_money_moved_behind_the_books(alice, bob):
    earn(alice, bob, MIN)
    request_cashout(bob, MIN)
    assert economy_invariants() == []
    Account.objects.filter(code=cashout_code(bob.pk)).update(balance=MIN - 100)
    problems = economy_invariants()
    assert any("open cashouts total 5000000" in p for p in problems), problems
    assert any("funded - paid out" in p for p in problems), problems
    assert not verify_ledger().ok
