"""The ledger's own event types, each with the check of what its payload states against what
its postings move (ledger.payload_checks)."""

from typing import Any

from ledger.accounts import (
    FUNDING,
    REVENUE,
    VERIFICATION,
    available_code,
    cashout_code,
    earnings_code,
    job_held_code,
)
from ledger.payload_checks import moves_differ, sum_differs
from ledger.registry import (
    NON_NEGATIVE_INT,
    NULLABLE_INT,
    NULLABLE_STR,
    POSITIVE_INT,
    POSTINGS,
    STR,
    register,
)

TRANSFER_POSTED = register(
    "TransferPosted",
    properties={"postings": POSTINGS, "memo": STR, "kind": STR},
    description="A balanced transfer between accounts (corrections, test transfers).",
)
ACCOUNT_OPENED = register(
    "AccountOpened",
    properties={
        "code": STR,
        "kind": STR,
        "currency": STR,
        "allow_negative": {"type": "boolean"},
        "projected": {"type": "boolean"},
        "owner_id": {"type": ["integer", "null"]},
    },
    description="An account was opened in the books.",
)

# --- The credit economy (ledger.funding, settlement, cashouts, exports, pricing) ---------------
# Amounts are integers in minor units (1 credit = 100) or paise; every type that moves money
# carries its postings (added by entry_post).

_BOOL = {"type": "boolean"}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_DATETIME = {"type": "string", "format": "date-time"}


def _moved(p: dict[str, Any], source: str, destination: str) -> list[str]:
    """The payload's amount_minor moved from `source` to `destination`, and nothing else."""
    return moves_differ(p, {source: -p["amount_minor"], destination: p["amount_minor"]})


CREDITS_GRANTED = register(
    "CreditsGranted",
    properties={
        "user_id": POSITIVE_INT,
        "amount_minor": POSITIVE_INT,
        "source": {"enum": ["grant", "payment"]},
        "reference": STR,
        "payment_id": NULLABLE_STR,
        "paid_paise": NULLABLE_INT,
        "book_version": NULLABLE_INT,
        "postings": POSTINGS,
    },
    description="Credits entered from external funding: a finance grant or a provider payment.",
    check=lambda p: _moved(p, FUNDING, available_code(p["user_id"])),
)
CREDITS_HELD = register(
    "CreditsHeld",
    properties={
        "job_id": POSITIVE_INT,
        "submitter_id": POSITIVE_INT,
        "amount_minor": POSITIVE_INT,
        "postings": POSTINGS,
    },
    description="A job's maximum cost moved from its submitter's available credits to its hold.",
    check=lambda p: _moved(p, available_code(p["submitter_id"]), job_held_code(p["job_id"])),
)
CREDITS_RELEASED = register(
    "CreditsReleased",
    properties={
        "job_id": POSITIVE_INT,
        "submitter_id": POSITIVE_INT,
        "amount_minor": POSITIVE_INT,
        "postings": POSTINGS,
    },
    description="What was still held for an ended job went back to its submitter.",
    check=lambda p: _moved(p, job_held_code(p["job_id"]), available_code(p["submitter_id"])),
)


def _settled(p: dict[str, Any]) -> list[str]:
    """The charge splits into fee and operator share, and moves from the hold as they say.
    Whether the figures are right for the price and the book is settlement_check's question."""
    return sum_differs(p, "charged_minor", "fee_minor", "operator_minor") + moves_differ(
        p,
        {
            job_held_code(p["job_id"]): -p["charged_minor"],
            earnings_code(p["operator_id"]): p["operator_minor"],
            REVENUE: p["fee_minor"],
        },
    )


ATTEMPT_SETTLED = register(
    "AttemptSettled",
    properties={
        "attempt_id": POSITIVE_INT,
        "job_id": POSITIVE_INT,
        "submitter_id": POSITIVE_INT,
        "operator_id": POSITIVE_INT,
        "node_id": NULLABLE_INT,
        "charge": _BOOL,
        "price_per_s_minor": NON_NEGATIVE_INT,
        "runtime_ms": NON_NEGATIVE_INT,
        "timeout_ms": NON_NEGATIVE_INT,
        "billed_ms": NON_NEGATIVE_INT,
        "held_before_minor": NON_NEGATIVE_INT,
        "cost_minor": NON_NEGATIVE_INT,
        "charged_minor": NON_NEGATIVE_INT,
        "fee_minor": NON_NEGATIVE_INT,
        "operator_minor": NON_NEGATIVE_INT,
        "fee_bps": NON_NEGATIVE_INT,
        "book_version": POSITIVE_INT,
        "priced_at": _DATETIME,
        "tier": STR,
        "region": STR,
        "job_kind": STR,
        "postings": POSTINGS,
    },
    # A zero-cost settlement (infrastructure failure, nothing to charge) moves nothing and so
    # has no postings; it still records that the attempt was settled.
    required=[
        "attempt_id",
        "job_id",
        "submitter_id",
        "operator_id",
        "node_id",
        "charge",
        "price_per_s_minor",
        "runtime_ms",
        "timeout_ms",
        "billed_ms",
        "held_before_minor",
        "cost_minor",
        "charged_minor",
        "fee_minor",
        "operator_minor",
        "fee_bps",
        "book_version",
        "priced_at",
        "tier",
        "region",
        "job_kind",
    ],
    description="An attempt's cost, from its job's hold to the operator and the platform.",
    check=_settled,
)
SPOT_CHECK_SETTLED = register(
    "SpotCheckSettled",
    properties={
        "attempt_id": POSITIVE_INT,
        "job_id": POSITIVE_INT,
        "operator_id": POSITIVE_INT,
        "node_id": POSITIVE_INT,
        "price_per_s_minor": NON_NEGATIVE_INT,
        "runtime_ms": NON_NEGATIVE_INT,
        "timeout_ms": NON_NEGATIVE_INT,
        "billed_ms": NON_NEGATIVE_INT,
        "cost_minor": NON_NEGATIVE_INT,
        "operator_minor": NON_NEGATIVE_INT,
        "fee_bps": NON_NEGATIVE_INT,
        "book_version": POSITIVE_INT,
        "priced_at": _DATETIME,
        "postings": POSTINGS,
    },
    required=[
        "attempt_id",
        "job_id",
        "operator_id",
        "node_id",
        "price_per_s_minor",
        "runtime_ms",
        "timeout_ms",
        "billed_ms",
        "cost_minor",
        "operator_minor",
        "fee_bps",
        "book_version",
        "priced_at",
    ],
    description="A spot-check's attempt, paid by the platform's verification account: the "
    "operator's share of its cost, as a submitter's payment would have given it.",
    check=lambda p: moves_differ(
        p,
        {VERIFICATION: -p["operator_minor"], earnings_code(p["operator_id"]): p["operator_minor"]},
    ),
)
CASHOUT_REQUESTED = register(
    "CashoutRequested",
    properties={
        "cashout_id": POSITIVE_INT,
        "operator_id": POSITIVE_INT,
        "amount_minor": POSITIVE_INT,
        "fee_minor": NON_NEGATIVE_INT,
        "inr_paise": POSITIVE_INT,
        "fee_bps": NON_NEGATIVE_INT,
        "paise_per_credit": POSITIVE_INT,
        "min_cashout_paise": NON_NEGATIVE_INT,
        "book_version": POSITIVE_INT,
        "payout_details_sha256": _SHA256,
        "postings": POSTINGS,
    },
    description="An operator asked to cash out; the amount was reserved from earnings.",
    check=lambda p: _moved(p, earnings_code(p["operator_id"]), cashout_code(p["operator_id"])),
)
CASHOUT_APPROVED = register(
    "CashoutApproved",
    properties={"cashout_id": POSITIVE_INT},
    description="Finance approved a requested cashout.",
)
CASHOUT_REJECTED = register(
    "CashoutRejected",
    properties={
        "cashout_id": POSITIVE_INT,
        "from_status": {"enum": ["requested", "approved"]},
        "reason": STR,
        "postings": POSTINGS,
    },
    description="Finance rejected a cashout; the reserved credits went back to earnings.",
)
CASHOUT_PAID = register(
    "CashoutPaid",
    properties={"cashout_id": POSITIVE_INT, "payout_reference": STR, "postings": POSTINGS},
    description="A cashout was paid out: the credits left through external payouts.",
)
_EXPORTED = {
    "export_id": POSITIVE_INT,
    "period_from": _DATETIME,
    "period_to": _DATETIME,
    "count": POSITIVE_INT,
    "total_amount_minor": NON_NEGATIVE_INT,
    "total_fee_minor": NON_NEGATIVE_INT,
    "total_inr_paise": NON_NEGATIVE_INT,
    "sha256": _SHA256,
    "chain_head": _SHA256,
    "chain_seq": NULLABLE_INT,
    "cashout_ids": {"type": "array", "items": POSITIVE_INT, "minItems": 1},
}
CASHOUTS_EXPORTED = register(
    "CashoutsExported",
    properties=_EXPORTED,
    # chain_seq came after the first exports: those carry none.
    required=[name for name in _EXPORTED if name != "chain_seq"],
    description="A finance export of approved or paid cashouts, with its file's sha256 and the "
    "seal the hash chain's head was at.",
    check=lambda p: (
        []
        if p["count"] == len(set(p["cashout_ids"])) == len(p["cashout_ids"])
        else [f"count {p['count']} for {len(p['cashout_ids'])} cashout ids"]
    ),
)
_SPOT = {
    "region": STR,
    "tier": STR,
    "price_per_s_minor": POSITIVE_INT,
    "min_per_s_minor": POSITIVE_INT,
    "max_per_s_minor": POSITIVE_INT,
    "reason": STR,
}
SPOT_PRICE_CHANGED = register(
    "SpotPriceChanged",
    properties={**_SPOT, "old_price_per_s_minor": NULLABLE_INT},
    description="The market moved a (region, tier) spot price (or priced it for the first time).",
)
SPOT_BOUNDS_CHANGED = register(
    "SpotBoundsChanged",
    properties=_SPOT,
    description="An admin set the bounds of a (region, tier) spot price; the price was clamped.",
)
