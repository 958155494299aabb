"""What an inference request costs, held at the start and settled at the end, through the
ledger's one door (ledger.services.entry_post).

- `request_open`: the request's row and its InferenceRequested event, with the hold: the most
  it can cost (the hub's bound on the prompt's tokens + max_tokens, at the highest rates among
  the nodes it may be sent to) moves from the submitter's available credits to
  `inference:<id>:held`.
- `request_close`: once, when the request ends. The cost of the tokens the hub relayed
  (`token_cost`) moves from the hold to the operator's earnings and platform revenue (the
  book's fee split, as for jobs); the rest goes back to available. InferenceServed when the
  answer ended as the engine ended it; InferenceFailed, with why, otherwise (nothing relayed,
  or the node failed mid-answer: the caller pays only for what was delivered).

Both write the request's row and its event in one transaction; the row's state moves only
from `requested` (a guarded update), so a request is closed exactly once.
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from inference.models import InferenceModel, InferenceRequest, RequestState
from ledger import quotes
from ledger.accounts import (
    REVENUE,
    account_ensure,
    available_code,
    earnings_code,
    system_account,
)
from ledger.errors import InsufficientFunds
from ledger.models import Account, AccountKind
from ledger.pricing import fee_of_version
from ledger.services import Leg, account_open, entry_post

PER = 1_000_000  # token prices are per million tokens


def held_code(request_id: int) -> str:
    return f"inference:{request_id}:held"


def stream_of(request_id: int) -> str:
    return f"inference:{request_id}"


def token_cost(*, prompt_tokens: int, completion_tokens: int, rate_in: int, rate_out: int) -> int:
    """Minor units for the tokens at per-million rates, rounded down (as a job's seconds are)."""
    return (prompt_tokens * rate_in + completion_tokens * rate_out) // PER


@dataclass(frozen=True)
class Figures:
    """A closing's sums, recomputed from its inputs by `close_figures` (and by verify_ledger)."""

    cost: int
    charged: int
    fee: int
    operator: int
    released: int


def close_figures(
    *, held: int, prompt_tokens: int, completion_tokens: int, rate_in: int, rate_out: int,
    fee_bps: int,
) -> Figures:  # fmt: skip
    cost = token_cost(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        rate_in=rate_in,
        rate_out=rate_out,
    )
    charged = min(cost, held)
    split = quotes.fee_split(cost=charged, fee_bps=fee_bps)
    return Figures(cost, split.cost, split.fee, split.operator, held - split.cost)


def request_open(
    *, submitter_id: int, model: InferenceModel, kind: str, prompt_bound: int, max_tokens: int,
    rate_in: int, rate_out: int, book_version: int,
) -> InferenceRequest:  # fmt: skip
    """The request's row, its event and its hold, or InsufficientFunds (402) and nothing."""
    amount = max(
        1,
        token_cost(
            prompt_tokens=prompt_bound,
            completion_tokens=max_tokens,
            rate_in=rate_in,
            rate_out=rate_out,
        ),
    )
    code = available_code(submitter_id)
    # Read without a lock: the hold's posting checks the floor under the row's lock at the end of
    # the transaction (ledger_post), so a submitter's concurrent requests queue on that row for
    # one statement, not for the whole admission. This read spares a request that cannot be paid
    # for its writes, and words the refusal.
    available = Account.objects.filter(code=code).first()
    if available is None or available.balance < amount:
        raise _short(amount, available.balance if available is not None else 0)
    try:
        with transaction.atomic():
            request = InferenceRequest.objects.create(
                submitter_id=submitter_id,
                model=model,
                kind=kind,
                prompt_bound=prompt_bound,
                max_tokens=max_tokens,
                held_minor=amount,
                book_version=book_version,
            )
            held = account_open(
                code=held_code(request.pk), kind=AccountKind.HELD, owner_id=submitter_id, new=True
            )
            entry_post(
                kind="hold",
                legs=[Leg(available, -amount), Leg(held, amount)],
                stream=stream_of(request.pk),
                expected_version=0,
                event_type="InferenceRequested",
                payload={
                    "request_id": request.pk,
                    "submitter_id": submitter_id,
                    "model": model.name,
                    "model_sha256": model.sha256,
                    "kind": kind,
                    "prompt_bound": prompt_bound,
                    "max_tokens": max_tokens,
                    "rate_in": rate_in,
                    "rate_out": rate_out,
                    "book_version": book_version,
                    "amount_minor": amount,
                },
                actor=f"user:{submitter_id}",
            )
    except InsufficientFunds:
        # Another request of the submitter's took the credits after the read above; the entry
        # rolled the whole transaction back.
        raise _short(amount, Account.objects.get(code=code).balance) from None
    return request


def _short(amount: int, balance: int) -> InsufficientFunds:
    return InsufficientFunds(
        f"this request can cost up to {quotes.format_minor(amount)} credits, which are "
        f"held until it ends, but only {quotes.format_minor(balance)} are available: "
        "top up, or lower max_tokens",
        fields={"credits": [f"need {amount}, available {balance} (minor units)"]},
    )


@dataclass(frozen=True)
class Outcome:
    """How a request ended, as the hub saw it."""

    node_id: int | None
    operator_id: int | None
    prompt_tokens: int
    completion_tokens: int
    rate_in: int
    rate_out: int
    ttft_ms: int | None
    finish_reason: str | None  # the engine's, when the answer ended normally
    failure: str = ""  # why not, otherwise


_CLOSED_FIELDS = [
    "state", "node_id", "prompt_tokens", "completion_tokens", "charged_minor", "ttft_ms",
    "outcome", "finished_at",
]  # fmt: skip


def _accounts(*codes: str) -> dict[str, Account]:
    """The accounts of these codes that exist, by code."""
    return {account.code: account for account in Account.objects.filter(code__in=codes)}


def _ensured(read: dict[str, Account], *, code: str, kind: str, owner_id: int) -> Account:
    """The account as `_accounts` read it, or opened now: its first use."""
    return read.get(code) or account_ensure(code=code, kind=kind, owner_id=owner_id)


def request_close(request_id: int, outcome: Outcome) -> InferenceRequest:
    """Settle and close the request once; a second call returns it as it is."""
    with transaction.atomic():
        request = InferenceRequest.objects.select_for_update().get(pk=request_id)
        if request.state != RequestState.REQUESTED:
            return request
        if outcome.prompt_tokens > request.prompt_bound or (
            outcome.completion_tokens > request.max_tokens
        ):
            raise DomainError(f"request {request_id}: more tokens than it was held for")
        submitter_id = request.submitter_id
        # Every account the close may move, in one read. The hold's balance needs no lock of
        # its own: only this request's opening and closing move it, and the request's row is
        # locked above.
        held_at = held_code(request_id)
        accounts = _accounts(
            held_at,
            available_code(submitter_id),
            REVENUE,
            *([earnings_code(outcome.operator_id)] if outcome.operator_id is not None else []),
        )
        held = accounts[held_at]
        served = outcome.failure == "" and outcome.finish_reason is not None
        # The prompt is paid for once an answer was delivered (an empty one included).
        billed_prompt = outcome.prompt_tokens if served or outcome.completion_tokens else 0
        fee_bps = fee_of_version(request.book_version).platform_fee_bps
        figures = close_figures(
            held=held.balance,
            prompt_tokens=billed_prompt,
            completion_tokens=outcome.completion_tokens,
            rate_in=outcome.rate_in,
            rate_out=outcome.rate_out,
            fee_bps=fee_bps,
        )
        legs = [Leg(held, -held.balance)]
        if figures.operator:
            if outcome.operator_id is None:
                raise DomainError(f"request {request_id}: a charge with no operator to pay")
            earnings = _ensured(
                accounts,
                code=earnings_code(outcome.operator_id),
                kind=AccountKind.EARNINGS,
                owner_id=outcome.operator_id,
            )
            legs.append(Leg(earnings, figures.operator))
        if figures.fee:
            legs.append(Leg(accounts.get(REVENUE) or system_account(REVENUE), figures.fee))
        if figures.released:
            available = _ensured(
                accounts,
                code=available_code(submitter_id),
                kind=AccountKind.AVAILABLE,
                owner_id=submitter_id,
            )
            legs.append(Leg(available, figures.released))
        payload = {
            "request_id": request_id,
            "submitter_id": submitter_id,
            "operator_id": outcome.operator_id,
            "node_id": outcome.node_id,
            "prompt_tokens": billed_prompt,
            "completion_tokens": outcome.completion_tokens,
            "rate_in": outcome.rate_in,
            "rate_out": outcome.rate_out,
            "ttft_ms": outcome.ttft_ms,
            "held_before_minor": held.balance,
            "cost_minor": figures.cost,
            "charged_minor": figures.charged,
            "fee_minor": figures.fee,
            "operator_minor": figures.operator,
            "released_minor": figures.released,
            "fee_bps": fee_bps,
            "book_version": request.book_version,
            "outcome": outcome.finish_reason if served else outcome.failure,
        }
        entry_post(
            kind="settlement" if figures.charged else "release",
            legs=legs,
            stream=stream_of(request_id),
            expected_version=1,
            event_type="InferenceServed" if served else "InferenceFailed",
            payload=payload,
            actor="system:inference",
        )
        request.state = RequestState.SERVED if served else RequestState.FAILED
        request.node_id = outcome.node_id
        request.prompt_tokens = billed_prompt
        request.completion_tokens = outcome.completion_tokens
        request.charged_minor = figures.charged
        request.ttft_ms = outcome.ttft_ms
        request.outcome = payload["outcome"][:200]
        request.finished_at = timezone.now()
        request.save(update_fields=_CLOSED_FIELDS)
    return request
