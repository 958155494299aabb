"""Migration ledger 0010 moves base rates, tier and region multipliers into one table: every row
is copied there and back, and the book in force stays frozen on either side. Nodes 0007, which
drops the tier table's own multiplier, depends on it and fills that column again going back."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.utils import timezone

from ledger.models import PriceBook, PriceRule
from ledger.pricing import price_book_copy, rules_at
from tests.migrations import migrated_back_to

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("ledger", "0010_sealbatch_postgres_horizon_only")]
OLD = {
    "base_rate": "SELECT book_id, job_kind, rate_per_s_minor FROM ledger_baserate",
    "tier": "SELECT book_id, tier, multiplier FROM ledger_tiermultiplier",
    "region": "SELECT book_id, region, multiplier FROM ledger_regionmultiplier",
}


def _rules() -> set[tuple[int, str, str, Decimal]]:
    return set(PriceRule.objects.values_list("book_id", "kind", "key", "value"))


def _zoned(rules: set[tuple[int, str, str, Decimal]]) -> set[tuple[int, str, str, Decimal]]:
    zone = {"IN": "in", "US": "us", "GB": "uk"}
    return {
        (book, kind, zone.get(key, "eu") if kind == "region" else key, value)
        for book, kind, key, value in rules
    }


def test_it_copies_every_rule_across_and_back():
    draft = price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(days=7),
    )
    PriceRule.objects.filter(book=draft, key="rtx-4090").update(value=Decimal("4.25"))
    before = _rules()
    in_force = rules_at()
    assert len(before) > 3 * len(PriceBook.objects.all())

    with migrated_back_to(BEFORE), connection.cursor() as cursor:
        old = set()
        for kind, sql in OLD.items():
            cursor.execute(sql)
            old |= {(book, kind, key, Decimal(value)) for book, key, value in cursor.fetchall()}
        # Region rows are keyed by zone again there (ledger 0018 going back), as that code read.
        assert old == _zoned(before)
        # Going back past nodes 0007 too, the tier table gets the multipliers in force again.
        cursor.execute("SELECT multiplier FROM nodes_gputier WHERE slug = 'rtx-4090'")
        assert cursor.fetchone()[0] == in_force.tier_multiplier("rtx-4090")
        with pytest.raises(Exception, match="frozen"), transaction.atomic():
            cursor.execute(
                "DELETE FROM ledger_tiermultiplier WHERE book_id = %s", [in_force.version]
            )

    assert _rules() == before
    assert rules_at() == in_force
