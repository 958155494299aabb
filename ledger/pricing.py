"""The rules in force, regions, and the spot prices the market moves within admin-set bounds.

A region is a country (core.regions: an ISO 3166-1 alpha-2 code, or blank for a node that did
not say). The book's region multipliers are keyed by those codes, and a spot market is one
(region, tier): a country's nodes of one tier, or the nodes of one tier that named no country.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.errors import ConflictError, DomainError
from core.regions import region_code
from core.sql import statement
from ledger import quotes
from ledger.models import PriceBook, PriceRule, RuleKind, SpotPrice, spot_stream
from ledger.services import event_append

DEFAULT_JOB_KIND = "default"


class NoRulesInForce(DomainError):
    code = "no_price_book"
    http_status = 503


class UnknownTier(DomainError):
    code = "unknown_tier"


class UnknownModelPrice(DomainError):
    code = "unknown_model_price"
    http_status = 404


class PriceOutOfBounds(DomainError):
    code = "price_out_of_bounds"


class UnknownRegion(DomainError):
    code = "invalid_region"


def region_of(value: str | None) -> str:
    """A region as the rules key it: the country's code in capitals, or blank. What is not a
    country is UnknownRegion (400), so no price is ever made for one."""
    try:
        return region_code(value or "")
    except ValidationError as exc:
        raise UnknownRegion(exc.messages[0], fields={"region": exc.messages}) from None


@dataclass(frozen=True)
class Rules:
    version: int
    name: str
    effective_from: datetime
    base_rates: dict[str, int]
    tiers: dict[str, Decimal]
    regions: dict[str, Decimal]
    token_in: dict[str, int]  # model name -> credits-minor per million input tokens
    token_out: dict[str, int]  # model name -> credits-minor per million output tokens
    default_region_multiplier: Decimal
    platform_fee_bps: int
    cashout_fee_bps: int
    min_cashout_paise: int
    paise_per_credit: int

    def base_rate(self, job_kind: str = DEFAULT_JOB_KIND) -> int:
        return self.base_rates.get(job_kind, self.base_rates[DEFAULT_JOB_KIND])

    def tier_multiplier(self, tier: str) -> Decimal:
        try:
            return self.tiers[tier.strip().lower()]
        except KeyError:
            known = ", ".join(sorted(self.tiers))
            raise UnknownTier(
                f"no price for GPU tier {tier!r} in price book v{self.version} (known: {known})",
                fields={"tier": [f"one of {known}"]},
            ) from None

    def region_multiplier(self, region: str) -> Decimal:
        return self.regions.get(region_of(region), self.default_region_multiplier)

    def priced_models(self) -> set[str]:
        """Models with both token prices in this book: the ones a request can be billed for."""
        return set(self.token_in) & set(self.token_out)

    def token_rates(self, *, model: str, tier: str, region: str) -> tuple[int, int]:
        """A model's (input, output) price per million tokens on a node of `tier` in `region`:
        the book's prices under the same multipliers as a job's base rate."""
        if model not in self.priced_models():
            raise UnknownModelPrice(
                f"no token prices for model {model!r} in price book v{self.version}"
            )
        tier_m, region_m = self.tier_multiplier(tier), self.region_multiplier(region)
        per_in, per_out = (
            quotes.multiplied(
                base_minor=base[model], tier_multiplier=tier_m, region_multiplier=region_m
            )
            for base in (self.token_in, self.token_out)
        )
        return per_in, per_out

    def spot_initial(self, *, tier: str, region: str, job_kind: str = DEFAULT_JOB_KIND) -> int:
        return quotes.spot_initial(
            base_per_s_minor=self.base_rate(job_kind),
            tier_multiplier=self.tier_multiplier(tier),
            region_multiplier=self.region_multiplier(region),
        )


# The rules of books already in force, by version, kept by each process: such a book and its
# rates are frozen (a trigger refuses any change to them, migrations/0005), so they are read once.
# Which book is in force is still read on every call, so a new book counts the moment it takes
# effect. A book that took effect within the last FROZEN_AFTER is read again each time: the
# trigger judges by the database's clock at the writing transaction's start, so a transaction
# begun just before the book took effect, or a database clock a little behind the hub's, may
# still edit it.
_frozen_rules: dict[int, Rules] = {}
FROZEN_AFTER = timedelta(seconds=10)


def rules_forget() -> None:
    """Drop this process's kept rules (tests that start from an empty database)."""
    _frozen_rules.clear()


def _rules_of(book: PriceBook) -> Rules:
    by_kind: dict[str, dict[str, Decimal]] = {kind: {} for kind in RuleKind.values}
    for kind, key, value in PriceRule.objects.filter(book=book).values_list("kind", "key", "value"):
        by_kind[kind][key] = value
    return Rules(
        version=book.pk,
        name=book.name,
        effective_from=book.effective_from,
        base_rates={kind: int(rate) for kind, rate in by_kind[RuleKind.BASE_RATE].items()},
        tiers=by_kind[RuleKind.TIER],
        regions=by_kind[RuleKind.REGION],
        token_in={model: int(price) for model, price in by_kind[RuleKind.TOKEN_IN].items()},
        token_out={model: int(price) for model, price in by_kind[RuleKind.TOKEN_OUT].items()},
        default_region_multiplier=book.default_region_multiplier,
        platform_fee_bps=book.platform_fee_bps,
        cashout_fee_bps=book.cashout_fee_bps,
        min_cashout_paise=book.min_cashout_paise,
        paise_per_credit=book.paise_per_credit,
    )


def rules_version(version: int) -> Rules:
    """The rule set of one book version (to price under it, or recompute what was settled
    under it)."""
    rules = _frozen_rules.get(version)
    if rules is not None:
        return rules
    book = PriceBook.objects.filter(pk=version).first()
    if book is None:
        raise NoRulesInForce(f"price book v{version} does not exist")
    rules = _rules_of(book)
    if book.effective_from <= timezone.now() - FROZEN_AFTER:
        _frozen_rules[version] = rules
    return rules


def rules_at(when: datetime | None = None) -> Rules:
    """The rule set in force at `when` (now by default)."""
    return rules_version(fee_at(when or timezone.now()).version)


def known_tiers(when: datetime | None = None) -> list[str]:
    return sorted(rules_at(when).tiers)


@dataclass(frozen=True)
class Fee:
    version: int
    platform_fee_bps: int


def fee_at(when: datetime) -> Fee:
    """The platform fee of the book in force at `when` (ledger/sql/book_in_force.sql) and that
    book's version."""
    if timezone.is_naive(when):
        raise ValueError("fee_at needs a timezone-aware datetime")
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "book_in_force"), {"at": when})
        row = cursor.fetchone()
    if row is None:
        raise NoRulesInForce(f"no price book is in force at {when.isoformat()}")
    return Fee(version=row[0], platform_fee_bps=row[1])


def fee_of_version(version: int) -> Fee:
    """The platform fee of one book version (to settle or recompute what was priced under it),
    without the rest of its rules."""
    kept = _frozen_rules.get(version)
    if kept is not None:
        return Fee(version=version, platform_fee_bps=kept.platform_fee_bps)
    fee = PriceBook.objects.filter(pk=version).values_list("platform_fee_bps", flat=True).first()
    if fee is None:
        raise NoRulesInForce(f"price book v{version} does not exist")
    return Fee(version=version, platform_fee_bps=fee)


def price_book_copy(*, source: PriceBook, effective_from: datetime, name: str = "") -> PriceBook:
    """A new version with the same rules, editable until `effective_from`."""
    if timezone.is_naive(effective_from):
        raise ValueError("effective_from must be timezone-aware")
    with transaction.atomic():
        book = PriceBook.objects.create(
            name=name or f"copy of v{source.pk}",
            effective_from=effective_from,
            platform_fee_bps=source.platform_fee_bps,
            cashout_fee_bps=source.cashout_fee_bps,
            min_cashout_paise=source.min_cashout_paise,
            paise_per_credit=source.paise_per_credit,
            default_region_multiplier=source.default_region_multiplier,
        )
        PriceRule.objects.bulk_create(
            PriceRule(book=book, kind=r.kind, key=r.key, value=r.value) for r in source.rules.all()
        )
    return book


# --- Spot prices ------------------------------------------------------------------------------


def spot_market(*, region: str, tier: str) -> tuple[str, str]:
    """The (region, tier) of the spot market a node's region and tier trade in."""
    return region_of(region), tier.strip().lower()


def spot_price_read(*, region: str, tier: str, rules: Rules | None = None) -> tuple[int, int]:
    """The market price now, and the spot row's price it is (0 when the market has not priced
    the pair yet and the price is the rules' start)."""
    region, tier = spot_market(region=region, tier=tier)
    price = (
        SpotPrice.objects.filter(region=region, tier=tier)
        .values_list("price_per_s_minor", flat=True)
        .first()
    )
    if price is not None:
        return price, price
    return (rules or rules_at()).spot_initial(tier=tier, region=region), 0


def spot_price_get(*, region: str, tier: str, rules: Rules | None = None) -> int:
    """The market price now: the spot row if the market has priced it, else the rules' start."""
    return spot_price_read(region=region, tier=tier, rules=rules)[0]


def _default_bounds(initial: int) -> tuple[int, int]:
    low = max(1, initial * settings.ECONOMY_SPOT_MIN_PCT // 100)
    high = max(low, -(-initial * settings.ECONOMY_SPOT_MAX_PCT // 100))
    return low, high


def _spot_row_locked(*, region: str, tier: str, actor: str) -> SpotPrice:
    """The (region, tier) row, locked; created at the rules' starting price if new.

    Creation races are settled by the unique key inside a savepoint: the loser reads the row.
    """
    row = SpotPrice.objects.select_for_update().filter(region=region, tier=tier).first()
    if row is not None:
        return row
    initial = rules_at().spot_initial(tier=tier, region=region)
    low, high = _default_bounds(initial)
    try:
        with transaction.atomic():
            row = SpotPrice.objects.create(
                region=region,
                tier=tier,
                price_per_s_minor=initial,
                min_per_s_minor=low,
                max_per_s_minor=high,
                version=1,
            )
            event_append(
                stream=spot_stream(region, tier),
                type="SpotPriceChanged",
                actor=actor,
                expected_version=0,
                payload={
                    "region": region,
                    "tier": tier,
                    "old_price_per_s_minor": None,
                    "price_per_s_minor": initial,
                    "min_per_s_minor": low,
                    "max_per_s_minor": high,
                    "reason": "initial price from the rules in force",
                },
            )
            return row
    except (IntegrityError, ConflictError):
        # Another transaction created it first and has committed (the unique index waited).
        return SpotPrice.objects.select_for_update().get(region=region, tier=tier)


def _bump(row: SpotPrice, **changes: int) -> None:
    """Compare-and-set on the row's version: the event at version+1 is the only writer."""
    changed = SpotPrice.objects.filter(pk=row.pk, version=row.version).update(
        version=row.version + 1, updated_at=timezone.now(), **changes
    )
    if changed != 1:
        transaction.set_rollback(True)
        raise ConflictError(f"spot price {row.region}/{row.tier} moved while it was being set")


def spot_price_set(*, region: str, tier: str, price: int, reason: str, actor: str) -> SpotPrice:
    """Move the market price of (region, tier) to `price`, within the row's bounds.

    Appends SpotPriceChanged in the caller's transaction; setting the current price again
    writes nothing. A price outside the bounds is refused (the repricer clamps with
    `SpotPrice.clamp` first).
    """
    if type(price) is not int or price < 1:
        raise DomainError("a spot price is a positive integer", fields={"price": ["positive"]})
    region, tier = spot_market(region=region, tier=tier)
    with transaction.atomic():
        row = _spot_row_locked(region=region, tier=tier, actor=actor)
        if not row.min_per_s_minor <= price <= row.max_per_s_minor:
            raise PriceOutOfBounds(
                f"{price}/s is outside the bounds {row.min_per_s_minor}-{row.max_per_s_minor} "
                f"set for {region}/{tier}",
                fields={"price": [f"between {row.min_per_s_minor} and {row.max_per_s_minor}"]},
            )
        if price == row.price_per_s_minor:
            return row
        event_append(
            stream=spot_stream(region, tier),
            type="SpotPriceChanged",
            actor=actor,
            expected_version=row.version,
            payload={
                "region": region,
                "tier": tier,
                "old_price_per_s_minor": row.price_per_s_minor,
                "price_per_s_minor": price,
                "min_per_s_minor": row.min_per_s_minor,
                "max_per_s_minor": row.max_per_s_minor,
                "reason": reason[:200],
            },
        )
        _bump(row, price_per_s_minor=price)
        row.refresh_from_db()
        return row


def spot_bounds_set(
    *, region: str, tier: str, min_price: int, max_price: int, actor: str, reason: str = ""
) -> SpotPrice:
    """Set the bounds the market may move within (admins); the price is clamped into them."""
    if type(min_price) is not int or type(max_price) is not int or not 1 <= min_price <= max_price:
        raise DomainError(
            "bounds must be integers with 1 ≤ min ≤ max",
            fields={"min_price": ["1 ≤ min ≤ max"], "max_price": ["1 ≤ min ≤ max"]},
        )
    region, tier = spot_market(region=region, tier=tier)
    with transaction.atomic():
        row = _spot_row_locked(region=region, tier=tier, actor=actor)
        price = max(min_price, min(max_price, row.price_per_s_minor))
        if (row.min_per_s_minor, row.max_per_s_minor, row.price_per_s_minor) == (
            min_price,
            max_price,
            price,
        ):
            return row
        event_append(
            stream=spot_stream(region, tier),
            type="SpotBoundsChanged",
            actor=actor,
            expected_version=row.version,
            payload={
                "region": region,
                "tier": tier,
                "min_per_s_minor": min_price,
                "max_per_s_minor": max_price,
                "price_per_s_minor": price,
                "reason": reason[:200],
            },
        )
        _bump(row, min_per_s_minor=min_price, max_per_s_minor=max_price, price_per_s_minor=price)
        row.refresh_from_db()
        return row
