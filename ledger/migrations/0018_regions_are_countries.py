"""Region multipliers are keyed by country (ISO 3166-1 alpha-2, core.regions), not by zone.

The books had zones: in, us, uk, eu, and any other slug, which `region_for` reached from a
country (IN → in, GB → uk, an EU member → eu, any other country → its lowercase code). Each
book's zone rows become one row per country that reached them, at the zone's multiplier, so
every country is priced as before: a re-keying, not a change of rules. That is the one reason
it writes into books in force; their freezing trigger is off for these statements only, and the
rows are written inside this migration's transaction. A zone no country reached (`other`, which
the nodes that named no country had) has no key now; the book's default multiplier prices them.
Going back writes the zones again from the countries (an EU member's row gives eu).

A check constraint then keeps a region's key to the code's shape; `PriceRule.clean` (the admin)
checks it is a real country.

Spot prices keyed by zone stay, with their events, as the markets' history; the market opens a
(country, tier) market at the rules' starting price the first time it moves one.
"""

import importlib
from collections import defaultdict

from django.db import migrations, models
from django.db.models import Q

import core.regions
from core.regions import COUNTRIES

EU_MEMBERS = importlib.import_module("ledger.migrations.0004_seed_price_books").EU_MEMBERS
ZONE = {"IN": "in", "US": "us", "GB": "uk"} | dict.fromkeys(EU_MEMBERS, "eu")


def _zone(country: str) -> str:
    """The zone `ledger.pricing.region_for` priced a country in before this migration."""
    return ZONE.get(country, country.lower())


def _rewrite(apps, schema_editor, keyed) -> None:  # noqa: ANN001
    """Replace each book's region rows by `keyed(rows of the book)`, the freeze held off."""
    PriceRule = apps.get_model("ledger", "PriceRule")
    by_book = defaultdict(dict)
    for book_id, key, value in PriceRule.objects.filter(kind="region").values_list(
        "book_id", "key", "value"
    ):
        by_book[book_id][key] = value
    changed = {book: keyed(rows) for book, rows in by_book.items() if keyed(rows) != rows}
    if not changed:  # a database seeded by country (0004 today)
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("ALTER TABLE ledger_pricerule DISABLE TRIGGER ledger_pricerule_frozen")
        for book_id, rows in changed.items():
            PriceRule.objects.filter(book_id=book_id, kind="region").delete()
            PriceRule.objects.bulk_create(
                PriceRule(book_id=book_id, kind="region", key=key, value=value)
                for key, value in sorted(rows.items())
            )
        # The new rows' foreign-key checks are deferred to commit, and PostgreSQL alters no table
        # with checks pending: run them now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE ledger_pricerule ENABLE ALWAYS TRIGGER ledger_pricerule_frozen")


def zones_to_countries(apps, schema_editor):  # noqa: ANN001
    def countries(rows: dict) -> dict:
        if all(key in COUNTRIES for key in rows):  # keyed by country already
            return rows
        return {c: rows[_zone(c)] for c in COUNTRIES if _zone(c) in rows}

    _rewrite(apps, schema_editor, countries)


def countries_to_zones(apps, schema_editor):  # noqa: ANN001
    _rewrite(apps, schema_editor, lambda rows: {_zone(c): value for c, value in rows.items()})


class Migration(migrations.Migration):
    dependencies = [("ledger", "0017_token_prices")]

    operations = [
        migrations.RunPython(zones_to_countries, countries_to_zones),
        migrations.AddConstraint(
            model_name="pricerule",
            constraint=models.CheckConstraint(
                condition=~Q(kind="region") | Q(key__regex="^[A-Z]{2}$"),
                name="pricerule_region_code",
                violation_error_message="A region is an ISO 3166-1 alpha-2 code in capitals.",
            ),
        ),
        migrations.AlterField(
            model_name="spotprice",
            name="region",
            field=models.CharField(
                blank=True,
                help_text="ISO 3166-1 alpha-2 code; blank for nodes that named no country",
                max_length=16,
                validators=[core.regions.region_validator],
            ),
        ),
    ]
