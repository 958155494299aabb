"""Small builders for ledger tests."""

from django.db import transaction

from ledger.models import Account
from ledger.registry import STR, register
from ledger.services import account_open, event_append

# A payload with no money in it, so bare events leave the books alone.
register("TestNoted", properties={"memo": STR})


def open_account(code: str, kind: str = "test", **kwargs) -> Account:
    with transaction.atomic():
        return account_open(code=code, kind=kind, **kwargs)


def funded(code: str, amount: int) -> Account:
    """An account holding `amount`, funded from the external funding account."""
    from ledger.services import transfer

    source = open_account("external:funding", kind="funding")
    account = open_account(code)
    transfer(source=source, destination=account, amount=amount, actor="test", kind="topup")
    account.refresh_from_db()
    return account


def append(stream: str, memo: str = "x", **kwargs):
    """Append a TestNoted event with a chosen memo in its own transaction."""
    with transaction.atomic():
        return event_append(
            stream=stream, type="TestNoted", actor="test", payload={"memo": memo}, **kwargs
        )
