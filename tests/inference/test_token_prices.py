"""A model's token prices live in the versioned price book: keyed by its name, whole numbers,
frozen with their book, and put through the same tier and region multipliers as a job's rate."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from ledger.errors import ImmutableRecord
from ledger.models_pricing import PriceBook, PriceRule, RuleKind
from ledger.pricing import UnknownModelPrice, price_book_copy, rules_at
from tests.inference.conftest import price_tokens

pytestmark = pytest.mark.django_db


def _draft() -> PriceBook:
    in_force = PriceBook.objects.get(pk=rules_at().version)
    return price_book_copy(source=in_force, effective_from=timezone.now() + timedelta(days=30))


def test_token_prices_are_keyed_by_the_models_name_and_other_rules_by_slugs():
    book = _draft()
    PriceRule(book=book, kind=RuleKind.TOKEN_IN, key="TinyLlama-1.1B:q4/v1", value=5).full_clean()
    for kind, key in ((RuleKind.TOKEN_OUT, "a b"), (RuleKind.TOKEN_IN, "-x"),
                      (RuleKind.TIER, "RTX-4090"), (RuleKind.REGION, "in.x")):  # fmt: skip
        with pytest.raises(ValidationError) as raised:
            PriceRule(book=book, kind=kind, key=key, value=5).full_clean()
        assert "key" in raised.value.message_dict


def test_a_token_price_is_a_whole_number_of_at_least_one():
    book = _draft()
    for value in (Decimal("1.5"), Decimal("0")):
        with pytest.raises(IntegrityError), transaction.atomic():
            PriceRule.objects.create(book=book, kind=RuleKind.TOKEN_OUT, key="tiny", value=value)


def test_token_prices_are_frozen_with_their_book():
    price_tokens({"tiny": (100, 300)})
    book = PriceBook.objects.get(pk=rules_at().version)
    with pytest.raises(ImmutableRecord):
        PriceRule.objects.create(book=book, kind=RuleKind.TOKEN_IN, key="other", value=1)
    rule = book.rules.get(kind=RuleKind.TOKEN_IN, key="tiny")
    rule.value = 1
    with pytest.raises(ImmutableRecord):
        rule.save()


def test_the_rate_on_a_node_takes_the_tier_and_region_multipliers():
    price_tokens({"tiny": (1000, 3000)})
    rules = rules_at()
    assert rules.priced_models() == {"tiny"}
    # The seeded books: rtx-4090 × 3.0, region IN × 0.7, cpu × 0.8, US × 1.0.
    assert rules.token_rates(model="tiny", tier="rtx-4090", region="IN") == (2100, 6300)
    assert rules.token_rates(model="tiny", tier="cpu", region="US") == (800, 2400)
    with pytest.raises(UnknownModelPrice):
        rules.token_rates(model="missing", tier="cpu", region="US")


def test_a_model_priced_for_one_direction_only_is_not_priced():
    book = _draft()
    PriceRule.objects.create(book=book, kind=RuleKind.TOKEN_IN, key="half", value=5)
    book.effective_from = timezone.now() - timedelta(seconds=1)
    book.save()
    assert rules_at().priced_models() == set()


def test_a_copy_of_a_book_keeps_its_token_prices():
    price_tokens({"tiny": (100, 300)})
    assert _draft().rules.filter(kind__in=[RuleKind.TOKEN_IN, RuleKind.TOKEN_OUT]).count() == 2
