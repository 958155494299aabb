"""Price books: versions in force by date, frozen once in force, the fee cap; spot prices."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.errors import DomainError
from ledger.errors import ImmutableRecord
from ledger.models import Event, PriceBook, PriceRule, RuleKind, SpotPrice
from ledger.pricing import (
    NoRulesInForce,
    PriceOutOfBounds,
    UnknownRegion,
    UnknownTier,
    fee_of_version,
    price_book_copy,
    rules_at,
    rules_version,
    spot_bounds_set,
    spot_price_get,
    spot_price_set,
)
from ledger.verify import verify_ledger

pytestmark = pytest.mark.usefixtures("price_books")


def test_it_seeds_the_design_figures(price_books):
    rules = price_books
    assert rules.name == "2025 rate card"
    assert rules.platform_fee_bps == 2000
    assert rules.min_cashout_paise == 50_000
    design = {
        "rtx-5090": "3.0", "rtx-4090": "3.0", "rtx-3090": "2.5", "rtx-4070": "2.5",
        "rtx-3080": "2.0", "rtx-3060": "2.0", "rtx-2070": "2.0", "gtx-1080ti": "1.5",
        "gtx-1080": "1.5", "gtx-1660": "1.3", "cpu": "0.8",
    }  # fmt: skip
    assert {tier: rules.tiers[tier] for tier in design} == {
        tier: Decimal(m) for tier, m in design.items()
    }
    assert {r: rules.regions[r] for r in ("IN", "US", "GB", "DE", "FR")} == {
        "IN": Decimal("0.7"),
        "US": Decimal("1.0"),
        "GB": Decimal("1.0"),
        "DE": Decimal("0.95"),  # each member of the EU
        "FR": Decimal("0.95"),
    }
    assert len(rules.regions) == 3 + 27


def test_it_answers_with_the_book_in_force_at_a_moment():
    in_2024 = rules_at(datetime(2024, 6, 1, tzinfo=UTC))
    in_2025 = rules_at(datetime(2025, 6, 1, tzinfo=UTC))
    assert in_2024.tier_multiplier("gtx-1080") == Decimal("1.0")
    assert in_2025.tier_multiplier("gtx-1080") == Decimal("1.5")
    assert "rtx-5090" not in in_2024.tiers and "rtx-5090" in in_2025.tiers
    assert in_2024.version != in_2025.version
    with pytest.raises(NoRulesInForce):
        rules_at(datetime(2023, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="timezone-aware"):
        rules_at(datetime(2025, 6, 1))


def test_it_prices_a_tier_and_region_from_base_times_multipliers():
    rules = rules_at()
    assert rules.spot_initial(tier="rtx-4090", region="IN") == 105  # 50 * 3.0 * 0.7
    assert rules.spot_initial(tier="gtx-1080", region="GB") == 75  # 50 * 1.5 * 1.0
    assert rules.spot_initial(tier="gtx-1660", region="DE") == 62  # 61.75, half up
    assert rules.spot_initial(tier="cpu", region="in") == 28  # lowercase is the same country
    assert rules.spot_initial(tier="cpu", region="JP") == 40  # the default multiplier, 1.0
    assert rules.spot_initial(tier="cpu", region="") == 40  # so is no region
    with pytest.raises(UnknownTier, match="quantum-9000"):
        rules.spot_initial(tier="quantum-9000", region="IN")


@pytest.mark.parametrize("region", ["xx", "XX", "zz", "uk", "eu", "other"])
def test_nothing_is_priced_for_a_region_that_is_not_a_country(region):
    with pytest.raises(UnknownRegion, match="ISO 3166-1 alpha-2") as refused:
        rules_at().spot_initial(tier="cpu", region=region)
    assert refused.value.fields["region"]
    with pytest.raises(UnknownRegion):
        spot_price_get(region=region, tier="cpu")


def test_the_multiplier_table_is_keyed_by_real_countries():
    draft = _draft()
    for fake in ("XX", "zz", "UK", "EU", ""):
        with pytest.raises(ValidationError) as refused:
            PriceRule(book=draft, kind=RuleKind.REGION, key=fake, value=1).full_clean()
        assert "key" in refused.value.message_dict, fake
    rule = PriceRule(book=draft, kind=RuleKind.REGION, key="fj", value=Decimal("0.8"))
    rule.full_clean()
    assert rule.key == "FJ"
    # The database keeps the shape of the key, whatever writes it.
    with pytest.raises(IntegrityError, match="pricerule_region_code"), transaction.atomic():
        PriceRule.objects.create(book=draft, kind=RuleKind.REGION, key="fj", value=1)


def test_a_book_in_force_is_frozen_in_the_models():
    book = PriceBook.objects.order_by("-effective_from").first()
    book.platform_fee_bps = 1000
    with pytest.raises(ImmutableRecord, match="frozen"):
        book.save()
    row = PriceRule.objects.get(book=book, kind=RuleKind.TIER, key="rtx-4090")
    row.value = Decimal("9")
    with pytest.raises(ImmutableRecord):
        row.save()
    with pytest.raises(ImmutableRecord):
        book.delete()


@pytest.mark.postgres
def test_a_book_in_force_is_frozen_in_the_database():
    book_id = PriceBook.objects.order_by("-effective_from").values_list("pk", flat=True).first()
    for sql in (
        "UPDATE ledger_pricebook SET platform_fee_bps = 100 WHERE id = %s",
        "UPDATE ledger_pricerule SET value = 9 WHERE kind = 'tier' AND book_id = %s",
        "DELETE FROM ledger_pricerule WHERE kind = 'region' AND book_id = %s",
        "INSERT INTO ledger_pricerule (book_id, kind, key, value) VALUES (%s, 'tier', 'x', 1)",
    ):
        with pytest.raises(Exception, match="frozen"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, [book_id])
    assert rules_at().tier_multiplier("rtx-4090") == Decimal("3.0")


def test_the_database_refuses_a_platform_fee_above_20_percent():
    book = price_book_copy(
        source=PriceBook.objects.first(), effective_from=timezone.now() + timedelta(days=1)
    )
    book.platform_fee_bps = 2001
    with pytest.raises(IntegrityError, match="platform_fee"), transaction.atomic():
        book.save()
    book.refresh_from_db()
    book.platform_fee_bps = 2000
    book.save()  # a draft is editable up to the cap


def test_a_new_version_takes_over_at_its_effective_from():
    now = timezone.now()
    draft = price_book_copy(
        source=PriceBook.objects.first(), effective_from=now + timedelta(hours=1)
    )
    PriceRule.objects.filter(book=draft, kind=RuleKind.TIER, key="gtx-1080").update(
        value=Decimal("1.7")
    )
    assert rules_at(now).tier_multiplier("gtx-1080") == Decimal("1.5")
    later = rules_at(now + timedelta(hours=2))
    assert later.version == draft.pk
    assert later.tier_multiplier("gtx-1080") == Decimal("1.7")
    assert later.tiers.keys() == rules_at(now).tiers.keys()


def test_a_book_in_force_is_read_once_and_a_new_one_counts_at_once(django_assert_num_queries):
    in_force = rules_at()
    with django_assert_num_queries(1):  # which book is in force; its frozen rules are kept
        assert rules_at() is in_force
    with django_assert_num_queries(0):
        assert fee_of_version(in_force.version).platform_fee_bps == in_force.platform_fee_bps
    now = timezone.now()
    draft = price_book_copy(
        source=PriceBook.objects.get(pk=in_force.version), effective_from=now + timedelta(hours=1)
    )
    gtx = PriceRule.objects.filter(book=draft, kind=RuleKind.TIER, key="gtx-1080")
    gtx.update(value=Decimal("1.7"))
    assert rules_version(draft.pk).tier_multiplier("gtx-1080") == Decimal("1.7")
    gtx.update(value=Decimal("1.9"))  # a draft may still change: it is read each time
    assert rules_version(draft.pk).tier_multiplier("gtx-1080") == Decimal("1.9")
    PriceBook.objects.filter(pk=draft.pk).update(effective_from=now)  # published
    assert rules_at().version == draft.pk
    assert rules_at().tier_multiplier("gtx-1080") == Decimal("1.9")


def test_a_versions_fee_is_its_own_not_the_one_in_force():
    now = timezone.now()
    first = PriceBook.objects.first()
    draft = price_book_copy(source=first, effective_from=now + timedelta(hours=1))
    PriceBook.objects.filter(pk=draft.pk).update(platform_fee_bps=1500)
    assert fee_of_version(first.pk).platform_fee_bps == rules_version(first.pk).platform_fee_bps
    assert fee_of_version(draft.pk).platform_fee_bps == 1500
    assert fee_of_version(draft.pk).version == draft.pk
    with pytest.raises(NoRulesInForce):
        fee_of_version(draft.pk + 1000)


def test_the_market_moves_a_spot_price_within_bounds_and_records_it():
    assert spot_price_get(region="IN", tier="rtx-4090") == 105  # no row yet: the rules' start
    with transaction.atomic():
        row = spot_price_set(region="in", tier="rtx-4090", price=120, reason="demand", actor="beat")
    assert (row.region, row.price_per_s_minor, row.min_per_s_minor, row.max_per_s_minor) == (
        "IN",
        120,
        52,
        315,  # bounds 50% .. 300% of the starting 105
    )
    events = list(Event.objects.filter(stream="spot:IN:rtx-4090").order_by("version"))
    assert [e.type for e in events] == ["SpotPriceChanged", "SpotPriceChanged"]
    assert events[1].payload["old_price_per_s_minor"] == 105
    assert events[1].payload["reason"] == "demand"
    assert spot_price_get(region="IN", tier="rtx-4090") == 120

    with transaction.atomic():
        spot_price_set(region="IN", tier="rtx-4090", price=120, reason="same", actor="beat")
    assert Event.objects.filter(stream="spot:IN:rtx-4090").count() == 2  # no change, no event
    with pytest.raises(PriceOutOfBounds, match="52-315"):
        spot_price_set(region="IN", tier="rtx-4090", price=316, reason="spike", actor="beat")
    assert row.clamp(316) == 315 and row.clamp(1) == 52
    assert verify_ledger().ok


def test_admin_bounds_clamp_the_price_and_are_events():
    with transaction.atomic():
        spot_price_set(region="GB", tier="gtx-1080", price=100, reason="demand", actor="beat")
    with transaction.atomic():
        row = spot_bounds_set(
            region="GB", tier="gtx-1080", min_price=60, max_price=90, actor="user:dave"
        )
    assert (row.price_per_s_minor, row.min_per_s_minor, row.max_per_s_minor) == (90, 60, 90)
    assert Event.objects.filter(stream="spot:GB:gtx-1080", type="SpotBoundsChanged").count() == 1
    with pytest.raises(DomainError):
        spot_bounds_set(region="GB", tier="gtx-1080", min_price=10, max_price=5, actor="x")
    with pytest.raises(UnknownRegion):
        spot_bounds_set(region="uk", tier="gtx-1080", min_price=60, max_price=90, actor="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        SpotPrice.objects.filter(pk=row.pk).update(price_per_s_minor=91)
    report = verify_ledger()
    assert report.ok, report.problems


def test_verify_notices_a_spot_price_changed_behind_the_log():
    with transaction.atomic():
        spot_price_set(region="US", tier="cpu", price=45, reason="demand", actor="beat")
    SpotPrice.objects.filter(region="US", tier="cpu").update(price_per_s_minor=50)
    report = verify_ledger()
    assert any("spot price US/cpu" in p for p in report.problems), report.problems


def test_the_admin_shows_books_in_force_read_only_and_copies_them(client, dave):
    client.force_login(dave)
    book = PriceBook.objects.order_by("-effective_from").first()
    page = client.get(f"/admin/ledger/pricebook/{book.pk}/change/")
    assert page.status_code == 200
    assert b'name="platform_fee_bps"' not in page.content  # shown, not editable
    client.post(
        "/admin/ledger/pricebook/", {"action": "copy_as_draft", "_selected_action": [book.pk]}
    )
    draft = PriceBook.objects.order_by("-effective_from").first()
    assert draft.pk != book.pk and draft.effective_from > timezone.now()
    copied = {(r.kind, r.key, r.value) for r in draft.rules.all()}
    assert copied == {(r.kind, r.key, r.value) for r in book.rules.all()}
    editable = client.get(f"/admin/ledger/pricebook/{draft.pk}/change/")
    assert b'name="platform_fee_bps"' in editable.content


def _draft() -> PriceBook:
    """A copy of the book in force, taking effect in a week: editable until then."""
    return price_book_copy(
        source=PriceBook.objects.order_by("-effective_from").first(),
        effective_from=timezone.now() + timedelta(days=7),
    )


def _draft_form(draft: PriceBook, **values: str) -> dict[str, object]:
    """The admin's change form of a draft as a browser posts it, with some rules' values set."""
    rules = list(draft.rules.all())
    data: dict[str, object] = {
        "name": draft.name,
        "effective_from_0": draft.effective_from.strftime("%Y-%m-%d"),
        "effective_from_1": draft.effective_from.strftime("%H:%M:%S"),
        "platform_fee_bps": draft.platform_fee_bps,
        "cashout_fee_bps": draft.cashout_fee_bps,
        "min_cashout_paise": draft.min_cashout_paise,
        "paise_per_credit": draft.paise_per_credit,
        "default_region_multiplier": draft.default_region_multiplier,
        "created_at_0": draft.created_at.strftime("%Y-%m-%d"),
        "created_at_1": draft.created_at.strftime("%H:%M:%S"),
        "rules-TOTAL_FORMS": len(rules),
        "rules-INITIAL_FORMS": len(rules),
        "rules-MIN_NUM_FORMS": 0,
        "rules-MAX_NUM_FORMS": 1000,
    }
    for i, rule in enumerate(rules):
        data |= {
            f"rules-{i}-id": rule.pk,
            f"rules-{i}-book": draft.pk,
            f"rules-{i}-kind": rule.kind,
            f"rules-{i}-key": rule.key,
            f"rules-{i}-value": values.get(f"{rule.kind}:{rule.key}", rule.value),
        }
    return data


def test_the_admin_edits_a_drafts_rules_within_their_bounds(client, dave):
    client.force_login(dave)
    draft = _draft()
    url = f"/admin/ledger/pricebook/{draft.pk}/change/"
    for bad, message in (
        ({"tier:rtx-4090": "150"}, b"A multiplier is between"),
        ({"base_rate:default": "50.5"}, b"A price is a whole number"),
    ):
        page = client.post(url, _draft_form(draft, **bad))
        assert page.status_code == 200 and message in page.content
    response = client.post(url, _draft_form(draft, **{"tier:rtx-4090": "4.5"}))
    assert response.status_code == 302
    assert rules_version(draft.pk).tier_multiplier("rtx-4090") == Decimal("4.5")


def test_the_admin_adds_a_region_multiplier_only_for_a_real_country(client, dave):
    client.force_login(dave)
    draft = _draft()
    url = f"/admin/ledger/pricebook/{draft.pk}/change/"

    def with_region(key: str) -> dict[str, object]:
        form = _draft_form(draft)
        i = form["rules-TOTAL_FORMS"]
        form |= {"rules-TOTAL_FORMS": i + 1, f"rules-{i}-book": draft.pk}
        return form | {f"rules-{i}-kind": "region", f"rules-{i}-key": key, f"rules-{i}-value": 0.8}

    for fake in ("xx", "XX", "zz"):
        page = client.post(url, with_region(fake))
        assert page.status_code == 200 and b"ISO 3166-1 alpha-2" in page.content, fake
    assert client.post(url, with_region("jp")).status_code == 302
    assert rules_version(draft.pk).region_multiplier("JP") == Decimal("0.8")


def test_the_admin_sets_spot_bounds_through_the_service(client, dave):
    client.force_login(dave)
    response = client.post(
        "/admin/ledger/spotprice/add/",
        {
            "region": "in",
            "tier": "rtx-4090",
            "min_per_s_minor": 90,
            "max_per_s_minor": 100,
        },
    )
    assert response.status_code == 302, response.content[:2000]
    row = SpotPrice.objects.get(region="IN", tier="rtx-4090")
    assert (row.price_per_s_minor, row.min_per_s_minor, row.max_per_s_minor) == (100, 90, 100)
    assert Event.objects.filter(stream="spot:IN:rtx-4090", actor=f"user:{dave.pk}").exists()
    assert verify_ledger().ok


@pytest.mark.parametrize("region", ["xx", "XX", "zz", "uk"])
def test_the_admin_refuses_spot_bounds_for_a_region_that_is_not_a_country(client, dave, region):
    client.force_login(dave)
    response = client.post(
        "/admin/ledger/spotprice/add/",
        {"region": region, "tier": "cpu", "min_per_s_minor": 10, "max_per_s_minor": 20},
    )
    assert response.status_code == 200 and b"ISO 3166-1 alpha-2" in response.content
    assert not SpotPrice.objects.exists()
