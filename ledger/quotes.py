"""Pure money maths: no database, no clock. Every rounding rule of the economy is here.

Amounts are integers in minor units (1 credit = 100 minor units) or paise. Multipliers are
Decimals (exact decimal fractions from the rule tables), used only to form a price per second;
the result is rounded once, half up, to a whole minor unit.

The rules, fixed:
- spot price/s = round_half_up(base rate/s * tier multiplier * region multiplier), at least 1;
- node price/s = max(spot price/s, the node's floor);
- cost = floor(price/s * billed ms / 1000), billed ms = min(runtime ms, timeout ms): a fraction
  of a minor unit is never charged;
- platform fee = floor(cost * fee bps / 10000); the operator gets cost - fee, so the remainder of
  the division goes to the operator;
- credits → paise = minor * paise per credit / 100, exact: a cashout must be a whole number of
  paise (a multiple of `paise_granularity` minor units), and its fee is rounded down to one.
"""

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from math import gcd

MINOR_PER_CREDIT = 100
BPS = 10_000


def _require_int(name: str, value: int, *, minimum: int = 0) -> None:
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


def multiplied(*, base_minor: int, tier_multiplier: Decimal, region_multiplier: Decimal) -> int:
    """A base price (per second of work, or per million tokens) for a tier and a region: the
    product, rounded half up to whole minor units, and never below one."""
    _require_int("base_minor", base_minor, minimum=1)
    exact = Decimal(base_minor) * Decimal(tier_multiplier) * Decimal(region_multiplier)
    return max(1, int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP)))


def spot_initial(
    *, base_per_s_minor: int, tier_multiplier: Decimal, region_multiplier: Decimal
) -> int:
    return multiplied(
        base_minor=base_per_s_minor,
        tier_multiplier=tier_multiplier,
        region_multiplier=region_multiplier,
    )


def node_price(*, spot_per_s_minor: int, floor_per_s_minor: int = 0) -> int:
    _require_int("spot_per_s_minor", spot_per_s_minor, minimum=1)
    _require_int("floor_per_s_minor", floor_per_s_minor)
    return max(spot_per_s_minor, floor_per_s_minor)


def billed_ms(*, runtime_ms: int, timeout_ms: int) -> int:
    _require_int("runtime_ms", runtime_ms)
    _require_int("timeout_ms", timeout_ms)
    return min(runtime_ms, timeout_ms)


def cost_minor(*, price_per_s_minor: int, billed_ms: int) -> int:
    _require_int("price_per_s_minor", price_per_s_minor)
    _require_int("billed_ms", billed_ms)
    return price_per_s_minor * billed_ms // 1000


@dataclass(frozen=True)
class Split:
    cost: int
    fee: int
    operator: int


def fee_split(*, cost: int, fee_bps: int) -> Split:
    _require_int("cost", cost)
    _require_int("fee_bps", fee_bps)
    if fee_bps > BPS:
        raise ValueError(f"fee_bps {fee_bps} is above 100%")
    fee = cost * fee_bps // BPS
    return Split(cost=cost, fee=fee, operator=cost - fee)


def paise_granularity(paise_per_credit: int) -> int:
    """The smallest number of minor units that is a whole number of paise."""
    _require_int("paise_per_credit", paise_per_credit, minimum=1)
    return MINOR_PER_CREDIT // gcd(MINOR_PER_CREDIT, paise_per_credit)


def minor_to_paise(minor: int, *, paise_per_credit: int) -> int:
    """Exact conversion; a remainder means the caller skipped the granularity check."""
    _require_int("paise_per_credit", paise_per_credit, minimum=1)
    paise, remainder = divmod(minor * paise_per_credit, MINOR_PER_CREDIT)
    if remainder:
        raise ValueError(f"{minor} minor units is not a whole number of paise")
    return paise


def minor_to_paise_floor(minor: int, *, paise_per_credit: int) -> int:
    """For display only (earnings per hour in rupees): never used to move money."""
    _require_int("paise_per_credit", paise_per_credit, minimum=1)
    return minor * paise_per_credit // MINOR_PER_CREDIT


def paise_to_minor_floor(paise: int, *, paise_per_credit: int) -> int:
    """Credits bought with `paise` (a payment): a fraction of a minor unit is not credited."""
    _require_int("paise", paise)
    _require_int("paise_per_credit", paise_per_credit, minimum=1)
    return paise * MINOR_PER_CREDIT // paise_per_credit


@dataclass(frozen=True)
class CashoutFigures:
    amount: int
    fee: int
    net: int
    inr_paise: int
    gross_paise: int


def cashout_figures(*, amount: int, fee_bps: int, paise_per_credit: int) -> CashoutFigures:
    """The fee is rounded down to whole paise so the rest converts exactly."""
    _require_int("amount", amount, minimum=1)
    grain = paise_granularity(paise_per_credit)
    if amount % grain:
        raise ValueError(f"amount must be a multiple of {grain} minor units (whole paise)")
    fee = amount * fee_bps // BPS // grain * grain
    net = amount - fee
    return CashoutFigures(
        amount=amount,
        fee=fee,
        net=net,
        inr_paise=minor_to_paise(net, paise_per_credit=paise_per_credit),
        gross_paise=minor_to_paise(amount, paise_per_credit=paise_per_credit),
    )


def max_hold(*, ceiling_per_s_minor: int, timeout_s: int, slices: int, replicas: int = 1) -> int:
    """What a job holds at submission, its most: ceiling × timeout × slices × replicas. Every
    replica of a verified slice whose result agrees is paid; one added to break a disagreement
    is paid only in place of one that did not agree (jobs.verification), so this covers it."""
    return ceiling_per_s_minor * timeout_s * slices * replicas


@dataclass(frozen=True)
class JobQuote:
    max_minor: int  # what submit holds (max_hold)
    expected_minor: int  # every slice running `expected_runtime_s` at today's spot price
    spot_per_s_minor: int
    within_ceiling: bool  # False: today's spot is above the ceiling, no node would take it now


def job_quote(
    *,
    ceiling_per_s_minor: int,
    timeout_s: int,
    slices: int,
    spot_per_s_minor: int,
    expected_runtime_s: int | None = None,
    replicas: int = 1,
) -> JobQuote:
    _require_int("ceiling_per_s_minor", ceiling_per_s_minor, minimum=1)
    _require_int("replicas", replicas, minimum=1)
    _require_int("timeout_s", timeout_s, minimum=1)
    _require_int("slices", slices, minimum=1)
    _require_int("spot_per_s_minor", spot_per_s_minor, minimum=1)
    runtime_s = timeout_s if expected_runtime_s is None else expected_runtime_s
    _require_int("expected_runtime_s", runtime_s, minimum=0)
    within = spot_per_s_minor <= ceiling_per_s_minor
    return JobQuote(
        max_minor=max_hold(
            ceiling_per_s_minor=ceiling_per_s_minor,
            timeout_s=timeout_s,
            slices=slices,
            replicas=replicas,
        ),
        expected_minor=(
            spot_per_s_minor * min(runtime_s, timeout_s) * slices * replicas if within else 0
        ),
        spot_per_s_minor=spot_per_s_minor,
        within_ceiling=within,
    )


@dataclass(frozen=True)
class NodeEarnings:
    price_per_s_minor: int
    gross_per_hour_minor: int
    fee_per_hour_minor: int
    operator_per_hour_minor: int
    operator_per_hour_paise: int


def node_earnings_per_hour(
    *, price_per_s_minor: int, fee_bps: int, paise_per_credit: int
) -> NodeEarnings:
    """One hour settled as one settlement (several shorter ones may round a little lower)."""
    split = fee_split(
        cost=cost_minor(price_per_s_minor=price_per_s_minor, billed_ms=3_600_000), fee_bps=fee_bps
    )
    return NodeEarnings(
        price_per_s_minor=price_per_s_minor,
        gross_per_hour_minor=split.cost,
        fee_per_hour_minor=split.fee,
        operator_per_hour_minor=split.operator,
        operator_per_hour_paise=minor_to_paise_floor(
            split.operator, paise_per_credit=paise_per_credit
        ),
    )


def cost_per_tflop_hour(*, price_per_s_minor: int, tflops: float | None) -> int | None:
    """What an hour of one TFLOPS costs at this price (minor units, rounded half up): the price
    of an hour over what the hardware was measured to do. None where nothing was measured."""
    if tflops is None or tflops <= 0:
        return None
    hourly = Decimal(price_per_s_minor) * 3600 / Decimal(str(tflops))
    return int(hourly.quantize(Decimal(1), rounding=ROUND_HALF_UP))


# Where quotes learn a market's measured figures: the nodes app registers its reader (ledger
# knows nothing of nodes). (region, tier) → the median measured TFLOPS of its online nodes.
_market_tflops: list[Callable[[str, str], float | None]] = []


def register_market_tflops(reader: Callable[[str, str], float | None]) -> None:
    if reader not in _market_tflops:
        _market_tflops.append(reader)


def market_tflops(*, region: str, tier: str) -> float | None:
    return _market_tflops[0](region, tier) if _market_tflops else None


def format_minor(minor: int) -> str:
    """Credits as text, e.g. 378000 → "3780.00". Integer arithmetic only."""
    sign = "-" if minor < 0 else ""
    whole, part = divmod(abs(minor), MINOR_PER_CREDIT)
    return f"{sign}{whole}.{part:02d}"


def format_paise(paise: int) -> str:
    """Rupees as text, e.g. 3024 → "30.24"."""
    sign = "-" if paise < 0 else ""
    whole, part = divmod(abs(paise), 100)
    return f"{sign}{whole}.{part:02d}"


def parse_credits(text: str) -> int:
    """ "500", "500.5" or "500.25" credits → minor units, exactly (no floats; at most 2 places)."""
    whole, _, part = text.strip().partition(".")
    if not whole.isdigit() or (part and not part.isdigit()) or len(part) > 2:
        raise ValueError(f"{text!r} is not an amount of credits with at most two decimals")
    return int(whole) * MINOR_PER_CREDIT + int(part.ljust(2, "0") or 0)
