"""Ledger 0018 re-keys the books' region multipliers from zones to countries without moving any
country's price, and nodes 0010 makes every node's region a country: UK is GB, the rest blank."""

from decimal import Decimal

import pytest
from django.db import connection

from core.regions import COUNTRIES
from ledger.models import PriceBook, PriceRule
from ledger.pricing import rules_at
from nodes.models import Node
from tests.migrations import migrated_back_to
from tests.nodes.conftest import register_node

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("ledger", "0017_token_prices"), ("nodes", "0009_outcome_record_function")]


def _regions(book: PriceBook) -> dict[str, Decimal]:
    return dict(PriceRule.objects.filter(book=book, kind="region").values_list("key", "value"))


def test_the_zones_become_countries_at_the_same_price_and_back(bob):
    book = PriceBook.objects.order_by("-effective_from").first()
    before = rules_at()
    uk, fake, kept = (register_node(bob, name=n, region="IN")[0] for n in ("uk", "xx", "in"))

    with migrated_back_to(BEFORE), connection.cursor() as cursor:
        assert _regions(book) == {
            "in": Decimal("0.7"),
            "us": Decimal("1.0"),
            "uk": Decimal("1.0"),
            "eu": Decimal("0.95"),
        }
        # As registration took them before a region had to be a country.
        cursor.execute("UPDATE nodes_node SET region = 'UK' WHERE id = %s", [uk.pk])
        cursor.execute("UPDATE nodes_node SET region = 'XX' WHERE id = %s", [fake.pk])

    after = rules_at()
    assert after.regions == before.regions and set(after.regions) <= COUNTRIES
    assert {c: after.region_multiplier(c) for c in ("IN", "GB", "DE", "JP", "")} == {
        "IN": Decimal("0.7"),
        "GB": Decimal("1.0"),
        "DE": Decimal("0.95"),
        "JP": Decimal("1.0"),
        "": Decimal("1.0"),
    }
    regions = dict(Node.objects.values_list("pk", "region"))
    assert (regions[uk.pk], regions[fake.pk], regions[kept.pk]) == ("GB", "", "IN")
