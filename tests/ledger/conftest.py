"""Economy fixtures: the seeded price books, and users' ids for the money services.

A transactional test (django_db(transaction=True)) empties every table when it ends, the seeded
price books included, so tests that price anything ask for `price_books`, which seeds them again
(with the data migration's own function) when they are missing.
"""

import importlib

import pytest
from django.apps import apps

SEED = importlib.import_module("ledger.migrations.0004_seed_price_books")


def seed_price_books() -> None:
    from ledger.models import PriceBook

    if not PriceBook.objects.exists():
        SEED.seed(apps, None)


@pytest.fixture
def price_books(db):
    seed_price_books()
    from ledger.pricing import rules_at

    return rules_at()
