"""Random transfer sequences: the books balance, floors hold, a replay equals the live state."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from ledger.errors import InsufficientFunds
from ledger.models import Account, Posting
from ledger.services import account_balance, transfer
from ledger.verify import verify_ledger
from tests.ledger.helpers import open_account

ACCOUNTS = ["funding", "alice", "bob", "carol", "revenue"]
step = st.tuples(
    st.sampled_from(ACCOUNTS), st.sampled_from(ACCOUNTS), st.integers(min_value=1, max_value=5000)
).filter(lambda t: t[0] != t[1])


class TestRandomTransfers(TestCase):
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(step, min_size=1, max_size=25))
    def test_invariants_hold_after_every_step(self, steps):
        accounts = {
            "funding": open_account("external:funding", kind="funding"),
            "alice": open_account("alice"),
            "bob": open_account("bob"),
            "carol": open_account("carol"),
            "revenue": open_account("platform:revenue", kind="revenue", allow_negative=False),
        }
        model = dict.fromkeys(ACCOUNTS, 0)
        for source, destination, amount in steps:
            floor_ok = source == "funding" or model[source] >= amount
            try:
                transfer(
                    source=accounts[source],
                    destination=accounts[destination],
                    amount=amount,
                    actor="hypothesis",
                )
            except InsufficientFunds:
                assert not floor_ok
            else:
                assert floor_ok
                model[source] -= amount
                model[destination] += amount
            live = {name: account_balance(acc) for name, acc in accounts.items()}
            assert live == model
            assert sum(live.values()) == 0
            for name, acc in accounts.items():
                acc.refresh_from_db()
                if not acc.allow_negative and acc.projected:
                    assert acc.balance >= 0, name
        total = sum(Posting.objects.values_list("amount", flat=True))
        assert total == 0
        report = verify_ledger()
        assert report.ok, report.problems
        assert Account.objects.count() == 5
