"""The economy's account codes, and opening them safely under concurrency.

| code                   | kind      | who                | projected balance? |
|------------------------|-----------|--------------------|--------------------|
| `user:<id>:available`  | available | a submitter        | yes                |
| `job:<id>:held`        | held      | the job's submitter| yes                |
| `user:<id>:earnings`   | earnings  | an operator        | yes                |
| `user:<id>:cashout`    | cashout   | an operator        | yes (clearing)     |
| `platform:revenue`     | revenue   | the platform       | no (sum of postings)|
| `external:funding`     | funding   | outside world      | no, may be negative|
| `external:payouts`     | payouts   | outside world      | no                 |

Holds are per job, not per user, so releasing "whatever is still held for this job" is one
balance read and no bookkeeping of attempts.
"""

from django.db import transaction

from core.errors import ConflictError
from ledger.models import Account, AccountKind
from ledger.services import account_open

REVENUE = "platform:revenue"
# The platform's spending on spot-checks (jobs.verification): a revenue account that may go
# below zero, so the books show what checking untrusted nodes costs against what fees earn.
VERIFICATION = "platform:verification"
FUNDING = "external:funding"
PAYOUTS = "external:payouts"


def available_code(user_id: int) -> str:
    return f"user:{user_id}:available"


def earnings_code(user_id: int) -> str:
    return f"user:{user_id}:earnings"


def cashout_code(user_id: int) -> str:
    return f"user:{user_id}:cashout"


def job_held_code(job_id: int) -> str:
    return f"job:{job_id}:held"


_KIND_OF_SYSTEM = {
    REVENUE: AccountKind.REVENUE,
    VERIFICATION: AccountKind.REVENUE,
    FUNDING: AccountKind.FUNDING,
    PAYOUTS: AccountKind.PAYOUTS,
}


def account_ensure(*, code: str, kind: str, owner_id: int | None = None) -> Account:
    """The account `code`, opened if it is new, in the caller's transaction.

    Two first-ever settlements for one operator both try to open `user:<id>:earnings`; the
    loser's AccountOpened event collides on (stream, version) when the winner commits. Opening
    inside a savepoint lets the loser read the winner's account and go on, instead of failing
    the caller's whole transaction. The savepoint is paid only on the first use of an account.
    """
    account = Account.objects.filter(code=code).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            return account_open(
                code=code,
                kind=kind,
                owner_id=owner_id,
                allow_negative=kind == AccountKind.FUNDING or code == VERIFICATION,
            )
    except ConflictError:
        return Account.objects.get(code=code)


def system_account(code: str) -> Account:
    return account_ensure(code=code, kind=_KIND_OF_SYSTEM[code])
