import pytest
from django.db import transaction

from ledger.errors import InsufficientFunds, UnbalancedEntry
from ledger.models import Account, Entry, Event, Posting
from ledger.services import Leg, account_balance, entry_post, transfer
from ledger.verify import verify_ledger
from tests.ledger.helpers import funded, open_account

pytestmark = pytest.mark.django_db


def post(legs, **kwargs):
    with transaction.atomic():
        return entry_post(
            kind="test",
            legs=legs,
            stream="test:1",
            event_type="TransferPosted",
            payload={"memo": "", "kind": "test"},
            actor="test",
            **kwargs,
        )


def test_a_transfer_moves_money_and_records_it_once():
    alice = funded("alice:available", 1000)
    bob = open_account("bob:earnings")
    transfer(source=alice, destination=bob, amount=300, actor="test")
    alice.refresh_from_db()
    bob.refresh_from_db()
    assert (alice.balance, bob.balance) == (700, 300)
    event = Event.objects.get(entry__postings__account=bob)
    assert event.payload["postings"] == [
        ["alice:available", -300, "CRD"],
        ["bob:earnings", 300, "CRD"],
    ]
    assert verify_ledger().ok


@pytest.mark.parametrize("amounts", [[100, -99], [100], [0, 0], [1.5, -1.5], [True, -1]])
def test_it_refuses_unbalanced_or_non_integer_entries(amounts):
    accounts = [open_account(f"a{i}", allow_negative=True) for i in range(len(amounts))]
    with pytest.raises(UnbalancedEntry):
        post([Leg(a, x) for a, x in zip(accounts, amounts, strict=True)])
    assert Entry.objects.count() == 0 and Posting.objects.count() == 0


def test_it_refuses_to_overdraw_and_writes_nothing():
    alice = funded("alice:available", 100)
    bob = open_account("bob:earnings")
    entries = Entry.objects.count()
    with pytest.raises(InsufficientFunds, match="alice:available"):
        transfer(source=alice, destination=bob, amount=101, actor="test")
    alice.refresh_from_db()
    assert alice.balance == 100 and Entry.objects.count() == entries
    assert verify_ledger().ok


@pytest.mark.parametrize("short", [0, 1, 2])
def test_an_overdraft_on_any_leg_names_its_account_and_writes_nothing(short):
    # Balances move in id order (one statement on PostgreSQL, each move after the one before):
    # whichever leg crosses its floor, the legs before it are undone with everything else.
    accounts = [funded(f"u{i}:available", 100) for i in range(3)]
    amounts = [[-150, 75, 75], [75, -150, 75], [75, 75, -150]][short]
    before = (Entry.objects.count(), Event.objects.count())
    with pytest.raises(InsufficientFunds, match=f"u{short}:available"):
        post([Leg(a, x) for a, x in zip(accounts, amounts, strict=True)])
    assert [Account.objects.get(pk=a.pk).balance for a in accounts] == [100, 100, 100]
    assert (Entry.objects.count(), Event.objects.count()) == before
    assert verify_ledger().ok


def test_revenue_is_derived_from_postings_not_a_hot_row():
    alice = funded("alice:available", 1000)
    revenue = open_account("platform:revenue", kind="revenue")
    transfer(source=alice, destination=revenue, amount=200, actor="test")
    transfer(source=alice, destination=revenue, amount=50, actor="test")
    assert Account.objects.get(pk=revenue.pk).balance == 0  # no row is updated per settlement
    assert account_balance(revenue) == 250
    assert verify_ledger().ok


def test_a_replayed_entry_moves_nothing_twice():
    alice = funded("alice:available", 1000)
    bob = open_account("bob:earnings")
    first = transfer(source=alice, destination=bob, amount=10, actor="t", idempotency_key="s-1")
    again = transfer(source=alice, destination=bob, amount=10, actor="t", idempotency_key="s-1")
    assert first.pk == again.pk
    bob.refresh_from_db()
    assert bob.balance == 10


def test_external_funding_may_go_negative_and_the_books_sum_to_zero():
    funded("alice:available", 1000)
    funding = Account.objects.get(code="external:funding")
    assert funding.allow_negative and account_balance(funding) == -1000
    report = verify_ledger()
    assert report.ok, report.problems
