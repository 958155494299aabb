"""Reads of a person's money that more than one front end shows (the API, the web pages)."""

from dataclasses import asdict, dataclass

from django.db.models import Sum

from ledger.accounts import available_code, cashout_code, earnings_code
from ledger.models import Account, AccountKind


@dataclass(frozen=True)
class Balances:
    """A person's balances in credit minor units, read from the projected accounts."""

    available: int  # a submitter's spendable credits
    held: int  # a submitter's credits held for running jobs
    earnings: int  # an operator's earnings, not yet reserved by a cashout
    cashout_pending: int  # an operator's earnings reserved by open cashouts

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def balance_of(code: str) -> int:
    """A projected account's balance; 0 for an account not opened yet."""
    return Account.objects.filter(code=code).values_list("balance", flat=True).first() or 0


def user_balances(*, user_id: int) -> Balances:
    held = Account.objects.filter(owner_id=user_id, kind=AccountKind.HELD).aggregate(
        s=Sum("balance")
    )["s"]
    return Balances(
        available=balance_of(available_code(user_id)),
        held=held or 0,
        earnings=balance_of(earnings_code(user_id)),
        cashout_pending=balance_of(cashout_code(user_id)),
    )
