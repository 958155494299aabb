"""Builders for inference tests: a price book in force that prices models' tokens."""

from datetime import timedelta

from django.utils import timezone


def price_tokens(prices: dict[str, tuple[int, int]]) -> None:
    """Publish a copy of the book in force with token prices ({model: (per million in, out)}),
    as an admin would: drafted in the future, its rules added, then moved to now."""
    from ledger.models_pricing import PriceBook, PriceRule, RuleKind
    from ledger.pricing import price_book_copy, rules_at

    now = timezone.now()
    in_force = PriceBook.objects.get(pk=rules_at(now).version)
    book = price_book_copy(source=in_force, effective_from=now + timedelta(days=365))
    for model, (per_in, per_out) in prices.items():
        for kind, value in ((RuleKind.TOKEN_IN, per_in), (RuleKind.TOKEN_OUT, per_out)):
            rule = PriceRule(book=book, kind=kind, key=model, value=value)
            rule.full_clean()
            rule.save()
    book.effective_from = now - timedelta(seconds=1)
    book.save()
