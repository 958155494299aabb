"""The GPU-tier multiplier the claim reads comes from the price book in force, edits included."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from jobs import billing
from jobs.node_profile import profile_for
from ledger.models import PriceBook, PriceRule, RuleKind
from ledger.pricing import price_book_copy
from tests.jobs.conftest import register_node

pytestmark = pytest.mark.django_db


def publish(*, tier: str, multiplier: str) -> PriceBook:
    """What an admin does: copy the book in force as a draft, edit one row, publish it now."""
    draft = price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(days=7),
    )
    row = PriceRule.objects.get(book=draft, kind=RuleKind.TIER, key=tier)
    row.value = Decimal(multiplier)
    row.save()
    draft.effective_from = timezone.now()
    draft.save()
    return draft


def test_it_uses_a_multiplier_an_admin_just_published_without_a_restart(alice, monkeypatch):
    node, _ = register_node(alice, region="IN")
    assert node.tier == "rtx-4090"
    before = profile_for(node)
    assert (before.fit, before.price_per_s) == (3.0, 105)  # 50/s × 3.0 × 0.7 (in)

    publish(tier="rtx-4090", multiplier="4.0")
    # The hub process is not restarted; its per-process price caches run out.
    later = time.monotonic() + billing._PRICE_CACHE_S + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    after = profile_for(node)
    assert (after.fit, after.price_per_s) == (4.0, 140)  # 50/s × 4.0 × 0.7
