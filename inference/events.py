"""Event types of inference requests, on the request's stream `inference:<id>`, each with the
check of what its payload states against what its postings move (ledger.payload_checks)."""

from typing import Any

from inference.billing import held_code
from ledger.accounts import REVENUE, available_code, earnings_code
from ledger.payload_checks import moves_differ, sum_differs
from ledger.registry import INT, NULLABLE_INT, POSTINGS, STR, register


def _held(p: dict[str, Any]) -> list[str]:
    """The hold moved amount_minor from the submitter's available credits."""
    amount = p["amount_minor"]
    return moves_differ(
        p, {available_code(p["submitter_id"]): -amount, held_code(p["request_id"]): amount}
    )


def _closed(p: dict[str, Any]) -> list[str]:
    """The whole hold left it: the charge (fee and operator share) and the release, each to
    where the payload says. Whether the charge is right for the tokens is the projection's."""
    return (
        sum_differs(p, "charged_minor", "fee_minor", "operator_minor")
        + sum_differs(p, "held_before_minor", "charged_minor", "released_minor")
        + moves_differ(
            p,
            {
                held_code(p["request_id"]): -p["held_before_minor"],
                earnings_code(p["operator_id"]): p["operator_minor"],
                REVENUE: p["fee_minor"],
                available_code(p["submitter_id"]): p["released_minor"],
            },
        )
    )


register(
    "InferenceRequested",
    properties={
        "request_id": INT,
        "submitter_id": INT,
        "model": STR,
        "model_sha256": STR,
        "kind": STR,
        "prompt_bound": INT,
        "max_tokens": INT,
        "rate_in": INT,
        "rate_out": INT,
        "book_version": INT,
        "amount_minor": INT,
        "postings": POSTINGS,
    },
    description="A request was accepted and its maximum cost held.",
    check=_held,
)
_CLOSED = {
    "request_id": INT,
    "submitter_id": INT,
    "operator_id": NULLABLE_INT,
    "node_id": NULLABLE_INT,
    "prompt_tokens": INT,
    "completion_tokens": INT,
    "rate_in": INT,
    "rate_out": INT,
    "ttft_ms": NULLABLE_INT,
    "held_before_minor": INT,
    "cost_minor": INT,
    "charged_minor": INT,
    "fee_minor": INT,
    "operator_minor": INT,
    "released_minor": INT,
    "fee_bps": INT,
    "book_version": INT,
    "outcome": STR,
    "postings": POSTINGS,
}
register(
    "InferenceServed",
    properties=_CLOSED,
    description="The answer ended as the engine ended it (outcome: its finish reason); the "
    "relayed tokens were charged and the rest of the hold released.",
    check=_closed,
)
register(
    "InferenceFailed",
    properties=_CLOSED,
    description="The request ended otherwise (outcome: why); only tokens delivered were charged.",
    check=_closed,
)
