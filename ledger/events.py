"""The ledger's own event types."""

from ledger.registry import POSTINGS, STR, register

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
