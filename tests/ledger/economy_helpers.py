"""Builders for economy tests: each runs one service in its own transaction, as a caller would."""

from django.db import transaction

from ledger.cashouts import cashout_approve, cashout_request
from ledger.funding import credits_grant
from ledger.models import Account
from ledger.settlement import attempt_settle, credits_hold

UPI = {"method": "upi", "vpa": "bob@okbank"}
_grants = iter(range(1, 10**9))


def balance(code: str) -> int:
    return Account.objects.filter(code=code).values_list("balance", flat=True).first() or 0


def grant(user, amount: int) -> None:
    credits_grant(
        user_id=user.pk,
        amount=amount,
        actor="user:finance",
        reference="test",
        idempotency_key=f"test-grant-{next(_grants)}",
    )


def hold(user, job_id: int, amount: int):
    with transaction.atomic():
        return credits_hold(submitter_id=user.pk, job_id=job_id, amount=amount, actor="jobs")


def settle(
    submitter,
    operator,
    *,
    job_id: int,
    attempt_id: int,
    price: int,
    runtime_ms: int,
    timeout_ms: int = 3_600_000,
    charge: bool = True,
    **kwargs,
):
    with transaction.atomic():
        return attempt_settle(
            attempt_id=attempt_id,
            job_id=job_id,
            submitter_id=submitter.pk,
            operator_id=operator.pk,
            price_per_s_minor=price,
            runtime_ms=runtime_ms,
            timeout_ms=timeout_ms,
            charge=charge,
            actor="jobs",
            **kwargs,
        )


def earn(submitter, operator, amount: int, *, job_id: int = 9000) -> None:
    """Give `operator` exactly `amount` of earnings (a settlement with no platform fee share is
    impossible, so: pay a job whose operator share is `amount`)."""
    # A settlement of cost c pays the operator c - floor(c / 5), which grows by 0 or 1 as c
    # grows: start just below and step up to the exact cost.
    cost = max(amount, amount * 5 // 4 - 5)
    while cost - cost * 2000 // 10000 < amount:
        cost += 1
    assert cost - cost * 2000 // 10000 == amount
    grant(submitter, cost)
    hold(submitter, job_id, cost)
    settle(submitter, operator, job_id=job_id, attempt_id=job_id, price=cost, runtime_ms=1000)


def request_cashout(operator, amount: int, **kwargs):
    with transaction.atomic():
        return cashout_request(
            operator_id=operator.pk,
            amount=amount,
            payout_details=kwargs.pop("payout_details", UPI),
            actor=f"user:{operator.pk}",
            **kwargs,
        )


def approved_cashout(operator, amount: int):
    cashout = request_cashout(operator, amount)
    return cashout_approve(cashout_id=cashout.pk, actor="user:finance")
