"""Event types of inference requests, on the request's stream `inference:<id>`."""

from ledger.registry import INT, NULLABLE_INT, POSTINGS, STR, register

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
)
register(
    "InferenceFailed",
    properties=_CLOSED,
    description="The request ended otherwise (outcome: why); only tokens delivered were charged.",
)
