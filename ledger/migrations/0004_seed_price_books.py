"""Seed the price books with the design's figures.

Two versions, to show how rules change: the 2024 book priced a GTX 1080 at 1.0 and had no RTX
5090; the 2025 book (in force now) prices the GTX 1080 at 1.5 and adds the 5090. Generic tiers
match the nodes app's tier table, so a GPU it prices by memory also has a price here.

Units: 1 credit = 1 paisa (paise_per_credit = 1); credits are counted in minor units of 1/100,
so the base rate of 50 minor units per second is 0.5 credits/s = ₹18 per hour before multipliers.

A book is written as a draft (effective far in the future) and then published by moving its
effective_from back: on PostgreSQL a trigger (0005) refuses to change a book already in force.
"""

from datetime import UTC, datetime
from decimal import Decimal

from django.db import migrations

DRAFT = datetime(9999, 1, 1, tzinfo=UTC)

TIERS_2025 = {
    "rtx-5090": "3.0", "rtx-4090": "3.0", "rtx-3090": "2.5", "rtx-4070": "2.5",
    "rtx-3080": "2.0", "rtx-3060": "2.0", "rtx-2070": "2.0", "gtx-1080ti": "1.5",
    "gtx-1080": "1.5", "gtx-1660": "1.3",
    "generic-24gb": "2.0", "generic-16gb": "1.6", "generic-12gb": "1.4", "generic-8gb": "1.2",
    "generic-4gb": "1.0", "generic-small": "0.9",
    "cpu": "0.8",
}
TIERS_2024 = {k: v for k, v in TIERS_2025.items() if k != "rtx-5090"} | {"gtx-1080": "1.0"}
# Keyed by country (ISO 3166-1 alpha-2): India 0.7, the US and the UK 1.0, the EU's members 0.95.
# Books seeded before regions were countries had the zones in, us, uk and eu; 0018 re-keyed them
# to these rows, which price every country as the zones did.
EU_MEMBERS = (
    "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE",
    "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
)  # fmt: skip
REGIONS = {"IN": "0.7", "US": "1.0", "GB": "1.0"} | dict.fromkeys(EU_MEMBERS, "0.95")

BOOKS = [
    {
        "name": "2024 rate card",
        "effective_from": datetime(2024, 1, 1, tzinfo=UTC),
        "tiers": TIERS_2024,
    },
    {
        "name": "2025 rate card",
        "effective_from": datetime(2025, 1, 1, tzinfo=UTC),
        "tiers": TIERS_2025,
    },
]
COMMON = {
    "platform_fee_bps": 2000,  # 20%
    "cashout_fee_bps": 0,
    "min_cashout_paise": 50_000,  # ₹500
    "paise_per_credit": 1,
    "default_region_multiplier": Decimal("1.0"),
}
BASE_RATES = {"default": 50}  # minor units per second


def seed(apps, schema_editor):
    PriceBook = apps.get_model("ledger", "PriceBook")
    for spec in BOOKS:
        if PriceBook.objects.filter(effective_from=spec["effective_from"]).exists():
            continue
        draft = DRAFT.replace(year=9999 - BOOKS.index(spec))
        book = PriceBook.objects.create(name=spec["name"], effective_from=draft, **COMMON)
        rows = {"base_rate": BASE_RATES, "tier": spec["tiers"], "region": REGIONS}
        _write_rows(apps, book, rows)
        PriceBook.objects.filter(pk=book.pk).update(effective_from=spec["effective_from"])


def _write_rows(apps, book, rows):
    """Into the three tables of this migration's time, or (0010 on) into PriceRule: the tests
    reseed through this function with the current models."""
    try:
        PriceRule = apps.get_model("ledger", "PriceRule")
    except LookupError:
        PriceRule = None
    if PriceRule is not None:
        PriceRule.objects.bulk_create(
            PriceRule(book=book, kind=kind, key=key, value=Decimal(value))
            for kind, by_key in rows.items()
            for key, value in by_key.items()
        )
        return
    old = {
        "base_rate": ("BaseRate", "job_kind", "rate_per_s_minor"),
        "tier": ("TierMultiplier", "tier", "multiplier"),
        "region": ("RegionMultiplier", "region", "multiplier"),
    }
    for kind, by_key in rows.items():
        name, key_field, value_field = old[kind]
        Model = apps.get_model("ledger", name)
        Model.objects.bulk_create(
            Model(book=book, **{key_field: key, value_field: Decimal(value)})
            for key, value in by_key.items()
        )


class Migration(migrations.Migration):
    dependencies = [("ledger", "0003_economy")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
