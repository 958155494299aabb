"""Cashouts: requested (reserved from earnings) → approved → paid, or rejected (released).

Money: request moves the amount `user:<id>:earnings` → `user:<id>:cashout` (clearing) at once,
so it cannot be spent twice; reject moves it back; paid moves the net to `external:payouts`
and the cashout fee (if any) to platform revenue. A payout never creates credits.

Every transition is compare-and-set on (status, version) under the row's lock and appends its
event to `cashout:<id>` at the next version; repeating a transition that already happened
returns the cashout unchanged.
"""

import re
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ConflictError, DomainError
from ledger import metrics, quotes
from ledger.accounts import (
    PAYOUTS,
    REVENUE,
    account_ensure,
    cashout_code,
    earnings_code,
    system_account,
)
from ledger.canonical import canonical_json, sha256_hex
from ledger.errors import IdempotencyConflict, InsufficientFunds
from ledger.idempotency import idempotency_key_lock
from ledger.models import Account, AccountKind, Event
from ledger.models_cashouts import Cashout, CashoutStatus
from ledger.pricing import rules_at
from ledger.services import Leg, entry_post, event_append

_VPA = re.compile(r"^[A-Za-z0-9._-]{2,256}@[A-Za-z][A-Za-z0-9]{1,63}$")
_IFSC = re.compile(r"^[A-Z]{4}0[A-Z0-9]{6}$")
_ACCOUNT_NUMBER = re.compile(r"^[0-9]{6,18}$")


class CashoutConflict(ConflictError):
    code = "cashout_state"


def _invalid(field: str, message: str) -> DomainError:
    return DomainError(message, fields={f"payout_details.{field}": [message]})


def payout_details_clean(details: Any) -> dict[str, str]:
    """UPI (`{"method": "upi", "vpa": "name@bank"}`) or an Indian bank account
    (`{"method": "bank", "account_name", "account_number", "ifsc"}`); nothing else."""
    if not isinstance(details, dict):
        raise _invalid("method", "payout details must be an object")
    method = details.get("method")
    if method == "upi":
        allowed = {"method", "vpa"}
        vpa = details.get("vpa")
        if not isinstance(vpa, str) or not _VPA.match(vpa.strip()):
            raise _invalid("vpa", "a UPI id such as name@bank")
        clean = {"method": "upi", "vpa": vpa.strip()}
    elif method == "bank":
        allowed = {"method", "account_name", "account_number", "ifsc"}
        name = details.get("account_name")
        number = details.get("account_number")
        ifsc = details.get("ifsc")
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100:
            raise _invalid("account_name", "the account holder's name (1-100 characters)")
        if not isinstance(number, str) or not _ACCOUNT_NUMBER.match(number):
            raise _invalid("account_number", "6-18 digits")
        if not isinstance(ifsc, str) or not _IFSC.match(ifsc.strip().upper()):
            raise _invalid("ifsc", "an IFSC code such as HDFC0001234")
        clean = {
            "method": "bank",
            "account_name": name.strip(),
            "account_number": number,
            "ifsc": ifsc.strip().upper(),
        }
    else:
        raise _invalid("method", "method must be 'upi' or 'bank'")
    extra = set(details) - allowed
    if extra:
        raise _invalid(sorted(extra)[0], "unexpected field")
    return clean


def payout_details_hash(details: dict[str, str]) -> str:
    return sha256_hex(canonical_json(details))


def cashout_request(
    *,
    operator_id: int,
    amount: int,
    payout_details: dict[str, Any],
    actor: str,
    idempotency_key: str | None = None,
) -> Cashout:
    """Ask to cash out `amount` minor units of earnings, reserving them at once.

    At least the minimum cashout (in rupees, at the rate in force), at most the earnings
    available, a whole number of paise. With `idempotency_key` a retried request returns the
    original cashout.
    """
    if type(amount) is not int or amount <= 0:
        raise DomainError(
            "amount must be a positive integer", fields={"amount_minor": ["positive"]}
        )
    details = payout_details_clean(payout_details)
    details_hash = payout_details_hash(details)
    rules = rules_at()
    try:
        figures = quotes.cashout_figures(
            amount=amount, fee_bps=rules.cashout_fee_bps, paise_per_credit=rules.paise_per_credit
        )
    except ValueError as exc:
        raise DomainError(str(exc), fields={"amount_minor": [str(exc)]}) from None
    if figures.gross_paise < rules.min_cashout_paise:
        minimum = -(-rules.min_cashout_paise * quotes.MINOR_PER_CREDIT // rules.paise_per_credit)
        raise DomainError(
            f"the minimum cashout is ₹{quotes.format_paise(rules.min_cashout_paise)} "
            f"({quotes.format_minor(minimum)} credits); this is "
            f"₹{quotes.format_paise(figures.gross_paise)}",
            fields={"amount_minor": [f"at least {minimum}"]},
        )
    key = f"cashout:{operator_id}:{idempotency_key}" if idempotency_key else None
    with transaction.atomic():
        if key is not None:
            idempotency_key_lock(key)
        earnings = (
            Account.objects.select_for_update().filter(code=earnings_code(operator_id)).first()
        )
        if key is not None:
            original = Event.objects.filter(idempotency_key=key).first()
            if original is not None:
                p = original.payload
                if (p["amount_minor"], p["payout_details_sha256"]) != (amount, details_hash):
                    raise IdempotencyConflict("this idempotency key was used for another cashout")
                return Cashout.objects.get(pk=p["cashout_id"])
        balance = earnings.balance if earnings is not None else 0
        if balance < amount:
            transaction.set_rollback(True)
            raise InsufficientFunds(
                f"you asked to cash out {quotes.format_minor(amount)} credits but have "
                f"{quotes.format_minor(balance)} in earnings",
                fields={"amount_minor": [f"at most {balance}"]},
            )
        clearing = account_ensure(
            code=cashout_code(operator_id), kind=AccountKind.CASHOUT, owner_id=operator_id
        )
        cashout = Cashout.objects.create(
            operator_id=operator_id,
            amount_minor=amount,
            fee_minor=figures.fee,
            inr_paise=figures.inr_paise,
            book_version=rules.version,
            paise_per_credit=rules.paise_per_credit,
            payout_details=details,
            payout_details_sha256=details_hash,
            version=1,
        )
        entry_post(
            kind="cashout_request",
            legs=[Leg(earnings, -amount), Leg(clearing, amount)],
            stream=cashout.stream,
            expected_version=0,
            event_type="CashoutRequested",
            payload={
                "cashout_id": cashout.pk,
                "operator_id": operator_id,
                "amount_minor": amount,
                "fee_minor": figures.fee,
                "inr_paise": figures.inr_paise,
                "fee_bps": rules.cashout_fee_bps,
                "paise_per_credit": rules.paise_per_credit,
                "min_cashout_paise": rules.min_cashout_paise,
                "book_version": rules.version,
                "payout_details_sha256": details_hash,
            },
            actor=actor,
            idempotency_key=key,
        )
        metrics.cashout_counted(CashoutStatus.REQUESTED)
        return cashout


def _locked(cashout_id: int) -> Cashout:
    cashout = Cashout.objects.select_for_update().filter(pk=cashout_id).first()
    if cashout is None:
        raise DomainError(f"no cashout {cashout_id}", fields={"cashout_id": ["not found"]})
    return cashout


def _cas(cashout: Cashout, **changes: Any) -> Cashout:
    """Move the row from the (status, version) we read to the next version, or refuse."""
    try:
        changed = Cashout.objects.filter(
            pk=cashout.pk, status=cashout.status, version=cashout.version
        ).update(version=cashout.version + 1, **changes)
    except IntegrityError:
        transaction.set_rollback(True)
        raise CashoutConflict("that payout reference already paid another cashout") from None
    if changed != 1:
        transaction.set_rollback(True)
        raise CashoutConflict(f"cashout {cashout.pk} changed while this was being decided")
    if "status" in changes:
        metrics.cashout_counted(changes["status"])
    cashout.refresh_from_db()
    return cashout


def _refuse(cashout: Cashout, action: str) -> CashoutConflict:
    return CashoutConflict(f"cashout {cashout.pk} is {cashout.status}: it cannot be {action}")


def cashout_approve(*, cashout_id: int, actor: str) -> Cashout:
    """requested → approved. Approving an approved or paid cashout changes nothing."""
    with transaction.atomic():
        cashout = _locked(cashout_id)
        if cashout.status in (CashoutStatus.APPROVED, CashoutStatus.PAID):
            return cashout
        if cashout.status != CashoutStatus.REQUESTED:
            raise _refuse(cashout, "approved")
        event_append(
            stream=cashout.stream,
            type="CashoutApproved",
            actor=actor,
            expected_version=cashout.version,
            payload={"cashout_id": cashout.pk},
        )
        now = timezone.now()
        return _cas(
            cashout,
            status=CashoutStatus.APPROVED,
            approved_at=now,
            decided_at=now,
            decided_by=actor,
        )


def cashout_reject(*, cashout_id: int, reason: str, actor: str) -> Cashout:
    """requested or approved → rejected; the reserved credits go back to earnings."""
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("a reason is required", fields={"reason": ["required"]})
    with transaction.atomic():
        cashout = _locked(cashout_id)
        if cashout.status == CashoutStatus.REJECTED:
            return cashout
        if cashout.status not in (CashoutStatus.REQUESTED, CashoutStatus.APPROVED):
            raise _refuse(cashout, "rejected")
        clearing = Account.objects.get(code=cashout_code(cashout.operator_id))
        earnings = Account.objects.get(code=earnings_code(cashout.operator_id))
        entry_post(
            kind="cashout_reject",
            legs=[Leg(clearing, -cashout.amount_minor), Leg(earnings, cashout.amount_minor)],
            stream=cashout.stream,
            expected_version=cashout.version,
            event_type="CashoutRejected",
            payload={"cashout_id": cashout.pk, "from_status": cashout.status, "reason": reason},
            actor=actor,
        )
        return _cas(
            cashout,
            status=CashoutStatus.REJECTED,
            decided_at=timezone.now(),
            decided_by=actor,
            reason=reason[:2000],
        )


def cashout_mark_paid(*, cashout_id: int, payout_reference: str, actor: str) -> Cashout:
    """approved → paid: the net leaves through external payouts, the fee goes to revenue.

    Marking it paid again with the same reference changes nothing; another reference is a
    conflict (one cashout is paid once).
    """
    reference = (payout_reference or "").strip()
    if not reference or len(reference) > 128:
        raise DomainError(
            "a payout reference of 1-128 characters is required",
            fields={"payout_reference": ["1-128 characters"]},
        )
    with transaction.atomic():
        cashout = _locked(cashout_id)
        if cashout.status == CashoutStatus.PAID:
            if cashout.payout_reference == reference:
                return cashout
            raise CashoutConflict(
                f"cashout {cashout.pk} was already paid with reference {cashout.payout_reference}"
            )
        if cashout.status != CashoutStatus.APPROVED:
            raise _refuse(cashout, "paid before it is approved")
        if Cashout.objects.filter(payout_reference=reference).exclude(pk=cashout.pk).exists():
            raise CashoutConflict(f"payout reference {reference} already paid another cashout")
        clearing = Account.objects.get(code=cashout_code(cashout.operator_id))
        legs = [
            Leg(clearing, -cashout.amount_minor),
            Leg(system_account(PAYOUTS), cashout.net_minor),
        ]
        if cashout.fee_minor:
            legs.append(Leg(system_account(REVENUE), cashout.fee_minor))
        entry_post(
            kind="cashout_paid",
            legs=legs,
            stream=cashout.stream,
            expected_version=cashout.version,
            event_type="CashoutPaid",
            payload={"cashout_id": cashout.pk, "payout_reference": reference},
            actor=actor,
        )
        return _cas(
            cashout,
            status=CashoutStatus.PAID,
            paid_at=timezone.now(),
            payout_reference=reference,
        )
