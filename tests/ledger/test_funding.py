"""Credits enter only from external funding: finance grants and signed payment webhooks."""

import json
import time

import pytest
from django.core.management import CommandError, call_command

from ledger.accounts import FUNDING, available_code
from ledger.errors import IdempotencyConflict
from ledger.funding import SIGNATURE_HEADER, credits_grant, webhook_sign
from ledger.models import Account, Entry, Event
from ledger.services import account_balance
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import balance

pytestmark = pytest.mark.usefixtures("price_books")

SECRET = "whsec-test-0123456789"


def test_finance_grants_credits_from_external_funding(api, alice, carol):
    response = api(carol, "finance").post(
        "/api/v1/credits/grants",
        {
            "user_id": alice.pk,
            "amount_minor": 50_000,
            "reference": "welcome",
            "idempotency_key": "t-1",
        },
    )
    assert response.status_code == 201, response.json()
    assert response.json()["available_minor"] == 50_000
    assert balance(available_code(alice.pk)) == 50_000
    assert account_balance(Account.objects.get(code=FUNDING)) == -50_000
    event = Event.objects.get(type="CreditsGranted")
    assert event.actor == f"user:{carol.pk}" and event.payload["source"] == "grant"
    assert verify_ledger().ok


def test_a_repeated_grant_moves_nothing_twice_and_a_different_one_is_a_conflict(alice):
    first = credits_grant(
        user_id=alice.pk, amount=100, actor="f", reference="", idempotency_key="k"
    )
    again = credits_grant(
        user_id=alice.pk, amount=100, actor="f", reference="", idempotency_key="k"
    )
    assert first.pk == again.pk and balance(available_code(alice.pk)) == 100
    with pytest.raises(IdempotencyConflict):
        credits_grant(user_id=alice.pk, amount=999, actor="f", reference="", idempotency_key="k")
    assert balance(available_code(alice.pk)) == 100


@pytest.mark.parametrize("amount", [0, -5, 1.5, "100"])
def test_a_grant_must_be_a_positive_integer(api, alice, carol, amount):
    response = api(carol, "finance").post(
        "/api/v1/credits/grants",
        {"user_id": alice.pk, "amount_minor": amount, "idempotency_key": f"bad-{amount}"},
        format="json",
    )
    if amount == "100":  # a numeric string is a number in JSON forms; it is accepted
        assert response.status_code == 201
        return
    assert response.status_code == 400, response.json()
    assert "amount_minor" in response.json()["fields"]
    assert not Entry.objects.filter(kind="topup").exists()


def test_only_finance_grants(api, alice, bob, dave):
    body = {"user_id": alice.pk, "amount_minor": 100, "idempotency_key": "x"}
    assert api(alice, "submitter").post("/api/v1/credits/grants", body).status_code == 403
    assert api(bob, "operator").post("/api/v1/credits/grants", body).status_code == 403
    assert api(dave, "admin").post("/api/v1/credits/grants", body).status_code == 201
    missing = api(dave, "admin").post(
        "/api/v1/credits/grants", {**body, "user_id": 99_999, "idempotency_key": "y"}
    )
    assert missing.status_code == 400 and "user_id" in missing.json()["fields"]


def test_the_grant_command_grants_once_per_key(alice):
    call_command("grant_credits", "alice", "12.50", "--key", "ticket-7", "--reference", "promo")
    call_command(
        "grant_credits", f"#{alice.pk}", "12.50", "--key", "ticket-7", "--reference", "promo"
    )
    assert balance(available_code(alice.pk)) == 1250
    with pytest.raises(CommandError, match="already used"):
        call_command("grant_credits", "alice", "99", "--key", "ticket-7", "--reference", "promo")
    with pytest.raises(CommandError, match="two decimals"):
        call_command("grant_credits", "alice", "1.005", "--key", "t-8")
    with pytest.raises(CommandError, match="positive"):
        call_command("grant_credits", "alice", "0", "--key", "t-9")
    with pytest.raises(CommandError, match="no user"):
        call_command("grant_credits", "nobody", "1", "--key", "t-10")


# --- The payment webhook ------------------------------------------------------------------


@pytest.fixture
def webhook(client, settings):
    settings.PAYMENT_WEBHOOK_SECRET = SECRET

    def post(body: dict | bytes, *, secret: str = SECRET, at: int | None = None, header=None):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        signature = webhook_sign(raw, secret=secret, timestamp=at or int(time.time()))
        headers = {} if header is False else {SIGNATURE_HEADER: header or signature}
        return client.post(
            "/api/v1/credits/webhook", data=raw, content_type="application/json", headers=headers
        )

    return post


def payment(alice, **overrides) -> dict:
    return {
        "id": "pay_001",
        "type": "payment.succeeded",
        "user_id": alice.pk,
        "amount_paise": 100_000,
        "currency": "INR",
        **overrides,
    }


def test_a_signed_payment_credits_the_user_once(webhook, alice):
    first = webhook(payment(alice))
    assert first.status_code == 200, first.json()
    assert first.json()["status"] == "credited"
    assert first.json()["amount_minor"] == 10_000_000  # ₹1000 at 1 paisa per credit
    again = webhook(payment(alice))  # providers deliver more than once
    assert again.status_code == 200 and again.json()["entry_id"] == first.json()["entry_id"]
    assert balance(available_code(alice.pk)) == 10_000_000
    assert Event.objects.filter(type="CreditsGranted").count() == 1
    conflict = webhook(payment(alice, amount_paise=5))
    assert conflict.status_code == 409
    assert verify_ledger().ok


@pytest.mark.parametrize(
    "tamper",
    ["bad-secret", "old", "future", "missing", "malformed", "body-changed"],
)
def test_an_unsigned_or_replayed_webhook_is_refused(webhook, alice, tamper):
    body = payment(alice)
    if tamper == "bad-secret":
        response = webhook(body, secret="guess")
    elif tamper == "old":
        response = webhook(body, at=int(time.time()) - 301)
    elif tamper == "future":
        # A minute past the window: seconds pass between signing and checking on a busy machine,
        # and each one brings a time in the future closer to the window.
        response = webhook(body, at=int(time.time()) + 360)
    elif tamper == "missing":
        response = webhook(body, header=False)
    elif tamper == "malformed":
        response = webhook(body, header="v1=abc")
    else:
        raw = json.dumps(body).encode()
        signature = webhook_sign(raw, secret=SECRET, timestamp=int(time.time()))
        response = webhook(
            json.dumps(payment(alice, amount_paise=9_999_999)).encode(), header=signature
        )
    assert response.status_code == 401, response.json()
    assert response.json()["error"] == "bad_signature"
    assert balance(available_code(alice.pk)) == 0


def test_the_webhook_validates_the_payment_and_ignores_other_events(webhook, alice):
    ignored = webhook({"id": "evt_1", "type": "payment.refunded"})
    assert ignored.status_code == 200 and ignored.json()["status"] == "ignored"
    for bad in (
        payment(alice, amount_paise=0),
        payment(alice, amount_paise=-100),
        payment(alice, currency="USD"),
        payment(alice, user_id=99_999),
    ):
        response = webhook(bad)
        assert response.status_code == 400, (bad, response.json())
    assert webhook(b"{not json").status_code == 400
    assert balance(available_code(alice.pk)) == 0


def test_the_webhook_is_off_without_a_secret(client, settings, alice):
    settings.PAYMENT_WEBHOOK_SECRET = None
    raw = json.dumps(payment(alice)).encode()
    response = client.post(
        "/api/v1/credits/webhook",
        data=raw,
        content_type="application/json",
        headers={SIGNATURE_HEADER: webhook_sign(raw, secret="x", timestamp=int(time.time()))},
    )
    assert response.status_code == 503


def test_balances_show_what_a_person_has(api, alice):
    credits_grant(user_id=alice.pk, amount=12_345, actor="f", reference="", idempotency_key="b")
    body = api(alice, "submitter").get("/api/v1/credits/me").json()
    assert body["available_minor"] == 12_345 and body["available"] == "123.45"
    assert body["held_minor"] == 0
