"""Credits enter the books only here: external funding → a user's available credits.

Two doors: a grant by finance (`credits_grant`: API, admin, `manage.py grant_credits`) and a
payment provider's webhook (`credits_topup_from_payment`, behind `webhook_verify`). Both are
idempotent: a grant by the caller's key, a payment by the provider's payment id.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from core.errors import DomainError
from core.signatures import signature_header, signature_problem
from ledger.accounts import FUNDING, account_ensure, available_code, system_account
from ledger.errors import IdempotencyConflict
from ledger.idempotency import idempotency_key_lock
from ledger.models import AccountKind, Entry, Event
from ledger.pricing import rules_at
from ledger.quotes import paise_to_minor_floor
from ledger.services import Leg, entry_post

MAX_GRANT_MINOR = 10**15  # far above any real grant; stops a typo of many digits


class WebhookRefused(DomainError):
    code = "bad_signature"
    http_status = 401


class WebhookNotConfigured(DomainError):
    code = "webhook_not_configured"
    http_status = 503


def _require_amount(amount: object, field: str = "amount_minor") -> int:
    if type(amount) is not int or amount <= 0:
        raise DomainError(
            f"{field} must be a positive integer number of minor units",
            fields={field: ["a positive integer"]},
        )
    if amount > MAX_GRANT_MINOR:
        raise DomainError(f"{field} is implausibly large", fields={field: ["too large"]})
    return amount


def _require_user(user_id: object) -> int:
    if type(user_id) is not int or not get_user_model().objects.filter(pk=user_id).exists():
        raise DomainError(f"no user {user_id!r}", fields={"user_id": ["no such user"]})
    return user_id


def _fund(
    *,
    user_id: int,
    amount: int,
    actor: str,
    idempotency_key: str,
    payload: dict,
) -> Entry:
    """Inside the caller's transaction, which holds the key's lock (a twin waits for it and then
    finds the original, which `entry_post` returns)."""
    funding = system_account(FUNDING)
    available = account_ensure(
        code=available_code(user_id), kind=AccountKind.AVAILABLE, owner_id=user_id
    )
    return entry_post(
        kind="topup",
        legs=[Leg(funding, -amount), Leg(available, amount)],
        # One stream per top-up: top-ups never contend on a stream version.
        stream=f"topup:{idempotency_key}",
        expected_version=0,
        event_type="CreditsGranted",
        payload={"user_id": user_id, "amount_minor": amount, **payload},
        actor=actor,
        idempotency_key=idempotency_key,
    )


def credits_grant(
    *, user_id: int, amount: int, actor: str, reference: str, idempotency_key: str
) -> Entry:
    """Finance grants `amount` minor units to a user. The same key again returns the original
    entry; the same key for a different grant is a 409."""
    _require_amount(amount)
    _require_user(user_id)
    if not idempotency_key or len(idempotency_key) > 150:
        raise DomainError(
            "an idempotency key of 1-150 characters is required",
            fields={"idempotency_key": ["1-150 characters"]},
        )
    key = f"grant:{idempotency_key}"
    with transaction.atomic():
        idempotency_key_lock(key)
        return _fund(
            user_id=user_id,
            amount=amount,
            actor=actor,
            idempotency_key=key,
            payload={
                "source": "grant",
                "reference": reference[:200],
                "payment_id": None,
                "paid_paise": None,
                "book_version": None,
            },
        )


def credits_topup_from_payment(
    *, payment_id: str, user_id: int, paid_paise: int, actor: str = "payment-provider"
) -> Entry:
    """A provider's payment of `paid_paise`, credited at the rate in force. Replaying the same
    payment id returns the original entry (providers deliver webhooks more than once)."""
    _require_amount(paid_paise, "amount_paise")
    _require_user(user_id)
    if not payment_id or len(payment_id) > 150:
        raise DomainError("a payment id of 1-150 characters is required", fields={"id": ["bad"]})
    key = f"payment:{payment_id}"
    with transaction.atomic():
        idempotency_key_lock(key)
        original = Event.objects.filter(idempotency_key=key).first()
        if original is not None:
            # Answer a redelivery from the log, not by recomputing at today's rate.
            paid = (original.payload["user_id"], original.payload["paid_paise"])
            if paid != (user_id, paid_paise):
                raise IdempotencyConflict(f"payment {payment_id} was already credited differently")
            return Entry.objects.get(event=original)
        rules = rules_at()
        amount = paise_to_minor_floor(paid_paise, paise_per_credit=rules.paise_per_credit)
        _require_amount(amount, "amount_paise")
        return _fund(
            user_id=user_id,
            amount=amount,
            actor=actor,
            idempotency_key=key,
            payload={
                "source": "payment",
                "reference": payment_id,
                "payment_id": payment_id,
                "paid_paise": paid_paise,
                "book_version": rules.version,
            },
        )


# --- Webhook signatures ------------------------------------------------------------------------
# Header: `X-Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`
# (core.signatures, the rule the hub's own webhooks are signed by too).

SIGNATURE_HEADER = "X-Payment-Signature"


def webhook_sign(body: bytes, *, secret: str, timestamp: int) -> str:
    return signature_header(body, secrets=[secret], timestamp=timestamp)


def webhook_verify(body: bytes, header: str | None, *, now: float | None = None) -> None:
    secret = settings.PAYMENT_WEBHOOK_SECRET
    if not secret:
        raise WebhookNotConfigured("payment webhooks are not configured on this hub")
    if not header:
        raise WebhookRefused(f"the {SIGNATURE_HEADER} header is missing")
    problem = signature_problem(
        body, header, secret=secret, tolerance_s=settings.PAYMENT_WEBHOOK_TOLERANCE_S, now=now
    )
    if problem:
        raise WebhookRefused(problem)
