"""Pricing rules, versioned as price books, and the spot prices the market moves.

A price book is one complete rule set (base rates, GPU-tier and region multipliers, the platform
fee, the cashout minimum and fee, the credit → INR rate) with an `effective_from`. The book in
force at a moment is the one with the latest `effective_from` at or before it. A book may be
edited until it takes effect; from then on it is frozen (the models refuse, the admin shows it
read-only), so any settlement that names its book can be recomputed years later. A change of
rules is a new book, usually a copy of the current one with the changes (admin action).
"""

from decimal import Decimal
from typing import Any, NoReturn

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Floor
from django.utils import timezone

from core.regions import CODE_PATTERN, region_code, region_validator
from ledger.errors import ImmutableRecord

MAX_PLATFORM_FEE_BPS = 2000  # 20%: the design caps the fee; the database refuses more
MAX_CASHOUT_FEE_BPS = 2000

MIN_MULTIPLIER, MAX_MULTIPLIER = Decimal("0.001"), Decimal("100")

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,31}$", "lowercase letters, digits and '-'")
# A model's name as clients send it (the inference catalog's names, and the key of its token
# prices here): letters, digits and . _ : / -, e.g. "tinyllama-1.1b-chat" or "org/name:q4".
model_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$",
    "letters, digits and . _ : / -, starting with a letter or digit (at most 100)",
)


def _refuse_frozen(book: "PriceBook") -> NoReturn:
    raise ImmutableRecord(
        f"price book v{book.pk} has been in force since {book.effective_from:%Y-%m-%d %H:%M} "
        "and is frozen: publish a new version instead"
    )


class PriceBook(models.Model):
    """One version of the pricing rules. Its id is the rule version settlements record."""

    name = models.CharField(max_length=100)
    effective_from = models.DateTimeField(unique=True)
    platform_fee_bps = models.PositiveIntegerField(
        validators=[MaxValueValidator(MAX_PLATFORM_FEE_BPS)],
        help_text="Platform fee in basis points of each settlement (2000 = 20%, the maximum).",
    )
    cashout_fee_bps = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_CASHOUT_FEE_BPS)],
        help_text="Fee on a cashout, in basis points of the amount (rounded down to whole paise).",
    )
    min_cashout_paise = models.PositiveBigIntegerField(
        help_text="The smallest cashout, in paise (₹500 = 50000)."
    )
    paise_per_credit = models.PositiveIntegerField(
        validators=[MinValueValidator(1)], help_text="What one credit (100 minor units) is worth."
    )
    default_region_multiplier = models.DecimalField(
        max_digits=6,
        decimal_places=3,
        default=Decimal("1.000"),
        validators=[MinValueValidator(MIN_MULTIPLIER), MaxValueValidator(MAX_MULTIPLIER)],
        help_text="For a region with no row of its own.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-effective_from"]
        constraints = [
            models.CheckConstraint(
                condition=Q(platform_fee_bps__gte=0, platform_fee_bps__lte=MAX_PLATFORM_FEE_BPS),
                name="pricebook_platform_fee_at_most_20pct",
            ),
            models.CheckConstraint(
                condition=Q(cashout_fee_bps__gte=0, cashout_fee_bps__lte=MAX_CASHOUT_FEE_BPS),
                name="pricebook_cashout_fee_bounded",
            ),
            models.CheckConstraint(
                condition=Q(paise_per_credit__gte=1), name="pricebook_rate_positive"
            ),
            models.CheckConstraint(
                condition=Q(default_region_multiplier__gt=0),
                name="pricebook_default_region_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"v{self.pk} {self.name} (from {self.effective_from:%Y-%m-%d})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.in_force_since_saved():
            _refuse_frozen(self)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        if self.in_force_since_saved():
            _refuse_frozen(self)
        return super().delete(*args, **kwargs)

    @property
    def version(self) -> int:
        return self.pk

    def in_force_since_saved(self) -> bool:
        """Whether the stored row (not this instance's edits) has taken effect."""
        if self.pk is None:
            return False
        stored = PriceBook.objects.filter(pk=self.pk).values_list("effective_from", flat=True)
        return any(when <= timezone.now() for when in stored)


class RuleKind(models.TextChoices):
    BASE_RATE = "base_rate", "base rate of a job kind (credits-minor per second)"
    TIER = "tier", "GPU-tier multiplier"
    REGION = "region", "region multiplier"
    TOKEN_IN = "token_in", "a model's input tokens (credits-minor per million)"
    TOKEN_OUT = "token_out", "a model's output tokens (credits-minor per million)"


# Kinds whose value is a price (a whole number of credits-minor), not a multiplier.
PRICE_KINDS = (RuleKind.BASE_RATE, RuleKind.TOKEN_IN, RuleKind.TOKEN_OUT)
# Kinds keyed by an inference model's name rather than a slug.
MODEL_KINDS = (RuleKind.TOKEN_IN, RuleKind.TOKEN_OUT)


class PriceRule(models.Model):
    """One row of a price book: a job kind's base rate, a GPU tier's or a region's multiplier,
    or an inference model's price per million input or output tokens.

    The key is a job kind (`default` covers every other kind), a tier slug the nodes app assigns,
    a country's ISO 3166-1 alpha-2 code (core.regions), or a model's name as clients send it.
    Frozen with its book.
    """

    book = models.ForeignKey(PriceBook, on_delete=models.CASCADE, related_name="rules")
    kind = models.CharField(max_length=16, choices=RuleKind.choices)
    key = models.CharField(max_length=100)
    value = models.DecimalField(
        max_digits=13,
        decimal_places=3,
        help_text="A price in whole credits-minor (per second for a base rate, per million "
        "tokens for a model), or a multiplier (0.001-100).",
    )

    class Meta:
        ordering = ["kind", "key"]
        constraints = [
            models.UniqueConstraint(fields=["book", "kind", "key"], name="pricerule_book_kind_key"),
            models.CheckConstraint(
                condition=Q(kind__in=RuleKind.values), name="pricerule_kind_known"
            ),
            models.CheckConstraint(condition=Q(value__gt=0), name="pricerule_positive"),
            models.CheckConstraint(
                condition=~Q(kind__in=PRICE_KINDS) | Q(value__gte=1, value=Floor("value")),
                name="pricerule_price_whole",
                violation_error_message="A price is a whole number of at least 1.",
            ),
            # The shape of a region's key; `clean` checks it is a real country.
            models.CheckConstraint(
                condition=~Q(kind=RuleKind.REGION) | Q(key__regex=CODE_PATTERN),
                name="pricerule_region_code",
                violation_error_message="A region is an ISO 3166-1 alpha-2 code in capitals.",
            ),
        ]

    def __str__(self) -> str:
        if self.kind == RuleKind.BASE_RATE:
            return f"{self.key}: {self.value:.0f}/s"
        if self.kind in MODEL_KINDS:
            return f"{self.key}: {self.value:.0f} per million {self.kind.removeprefix('token_')}put"
        return f"{self.kind} {self.key} * {self.value}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self._guard()
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        self._guard()
        return super().delete(*args, **kwargs)

    def clean(self) -> None:
        try:
            if self.kind == RuleKind.REGION:
                self.key = region_code(self.key)
                if not self.key:
                    raise ValidationError("A region multiplier names its country.")
            else:
                (model_name_validator if self.kind in MODEL_KINDS else slug_validator)(self.key)
        except ValidationError as exc:
            raise ValidationError({"key": exc.messages}) from None
        multiplier = self.kind not in PRICE_KINDS and self.value is not None
        if multiplier and not MIN_MULTIPLIER <= self.value <= MAX_MULTIPLIER:
            raise ValidationError(
                {"value": f"A multiplier is between {MIN_MULTIPLIER} and {MAX_MULTIPLIER}."}
            )

    def _guard(self) -> None:
        book = PriceBook.objects.filter(pk=self.book_id).first()
        if book is not None and book.in_force_since_saved():
            _refuse_frozen(book)


def spot_stream(region: str, tier: str) -> str:
    """The event stream of a market's price: `spot:<region>:<tier>` (`spot::cpu` for blank)."""
    return f"spot:{region}:{tier}"


class SpotPrice(models.Model):
    """The market price per second for a (region, tier): a projection of its events.

    Moved only by `ledger.pricing.spot_price_set` (the market) and `spot_bounds_set` (admins),
    each appending an event to the stream `spot:<region>:<tier>` at `version`.
    """

    # A country's code, or blank for the nodes that named none. Rows keyed by a pricing-zone slug
    # (in, us, uk, eu, other) are the markets before regions were countries: kept as history.
    region = models.CharField(
        max_length=16,
        blank=True,
        validators=[region_validator],
        help_text="ISO 3166-1 alpha-2 code; blank for nodes that named no country",
    )
    tier = models.CharField(max_length=32, validators=[slug_validator])
    price_per_s_minor = models.PositiveBigIntegerField()
    min_per_s_minor = models.PositiveBigIntegerField()
    max_per_s_minor = models.PositiveBigIntegerField()
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["region", "tier"], name="spotprice_region_tier"),
            # The market may move the price only within the bounds an admin set.
            models.CheckConstraint(
                condition=Q(min_per_s_minor__gte=1)
                & Q(min_per_s_minor__lte=models.F("max_per_s_minor"))
                & Q(price_per_s_minor__gte=models.F("min_per_s_minor"))
                & Q(price_per_s_minor__lte=models.F("max_per_s_minor")),
                name="spotprice_within_bounds",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.region}/{self.tier}: {self.price_per_s_minor}/s"

    @property
    def stream(self) -> str:
        return spot_stream(self.region, self.tier)

    def clamp(self, price: int) -> int:
        """The nearest price the bounds allow: the market's repricer calls this."""
        return max(self.min_per_s_minor, min(self.max_per_s_minor, price))
