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


@pytest.fixture
def ledger_key(settings):
    """Switch the ledger's signing key: call it with a private key (or None: the default).
    Yields the function; the next test loads its own key again."""
    import base64

    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    from ledger import seal_signing

    def use(private) -> None:
        raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        settings.LEDGER_SIGNING_KEY = base64.b64encode(raw).decode()
        seal_signing.reset_cache()

    yield use
    seal_signing.reset_cache()
