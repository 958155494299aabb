"""Hold, settle, release: the services the jobs app calls inside its own transaction.

- `credits_hold` at submit: the job's maximum cost, available → `job:<id>:held`.
- `attempt_settle` when an attempt ends: its cost, from the job's hold to the operator's
  earnings and platform revenue. Exactly once per attempt.
- `hold_release` when the job ends: whatever is still held goes back to available.
- `hold_lock`, for a caller with work to do between locking the job's hold and moving money
  (a completion): its result, passed to the two above, spares them their own reads.

Each takes its locks and appends its event in the caller's transaction, without a savepoint
(the hot path pays no extra round trips): an error marks the caller's whole transaction for
rollback, so a refused hold leaves no job behind.

Lock order: the job's hold row first, then balances in account id order (ledger.services), so
settlements of one job queue on its hold row and never deadlock with each other.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from core.sql import statement
from ledger import quotes, writes
from ledger.accounts import (
    REVENUE,
    VERIFICATION,
    account_ensure,
    available_code,
    earnings_code,
    job_held_code,
    system_account,
)
from ledger.errors import DomainError, IdempotencyConflict, InsufficientFunds
from ledger.models import Account, AccountKind, Entry, Event
from ledger.pricing import (
    DEFAULT_JOB_KIND,
    Fee,
    NoRulesInForce,
    Rules,
    fee_at,
    rules_version,
)
from ledger.services import Leg, entry_post, event_append


def _require(name: str, value: object, *, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise DomainError(
            f"{name} must be an integer ≥ {minimum}, got {value!r}",
            fields={name: [f"an integer ≥ {minimum}"]},
        )
    return value


def _entry_of(event: Event) -> Entry | None:
    return Entry.objects.filter(event=event).first()


def hold_key(job_id: int) -> str:
    return f"hold:job:{job_id}"


def settle_key(attempt_id: int) -> str:
    return f"settle:attempt:{attempt_id}"


# --- Hold -------------------------------------------------------------------------------------


def credits_hold(*, submitter_id: int, job_id: int, amount: int, actor: str) -> Entry:
    """Hold `amount` minor units for `job_id`: available → `job:<id>:held`.

    Once per job (idempotency key `hold:job:<id>`): the same call again returns the original
    entry; a different amount for the same job is an IdempotencyConflict (409). Not enough
    available credits raises InsufficientFunds (402) and marks the caller's transaction for
    rollback, so nothing of the submission is created.
    """
    _require("submitter_id", submitter_id, minimum=1)
    _require("job_id", job_id, minimum=1)
    _require("amount", amount, minimum=1)
    key = hold_key(job_id)
    with transaction.atomic(savepoint=False):
        # The submitter's row first: concurrent submits by one person queue here, and the
        # idempotency check below sees a committed twin.
        available = (
            Account.objects.select_for_update().filter(code=available_code(submitter_id)).first()
        )
        original = Event.objects.filter(idempotency_key=key).first()
        if original is not None:
            if (original.payload["submitter_id"], original.payload["amount_minor"]) != (
                submitter_id,
                amount,
            ):
                raise IdempotencyConflict(f"job {job_id} already holds a different amount")
            return _entry_of(original)
        balance = available.balance if available is not None else 0
        if balance < amount:
            transaction.set_rollback(True)
            raise InsufficientFunds(
                f"this job needs {quotes.format_minor(amount)} credits held, but only "
                f"{quotes.format_minor(balance)} are available: top up or lower the job's "
                "price ceiling, timeout or slices",
                fields={"credits": [f"need {amount}, available {balance} (minor units)"]},
            )
        held = account_ensure(
            code=job_held_code(job_id), kind=AccountKind.HELD, owner_id=submitter_id
        )
        if held.owner_id != submitter_id:
            raise DomainError(f"job {job_id}'s hold belongs to another submitter")
        return entry_post(
            kind="hold",
            legs=[Leg(available, -amount), Leg(held, amount)],
            stream=key,
            event_type="CreditsHeld",
            payload={"job_id": job_id, "submitter_id": submitter_id, "amount_minor": amount},
            actor=actor,
            idempotency_key=key,
        )


def job_held_balance(job_id: int) -> int:
    """What is still held for a job (0 if nothing was ever held)."""
    return (
        Account.objects.filter(code=job_held_code(job_id)).values_list("balance", flat=True).first()
        or 0
    )


def holds_outstanding(job_ids: Iterable[int]) -> tuple[int, int]:
    """How many of these jobs' holds still hold credits, and how much they hold in all."""
    codes = [job_held_code(job_id) for job_id in job_ids]
    if not codes:
        return 0, 0
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "holds_outstanding"), {"codes": codes})
        count, total = cursor.fetchone()
    return count, int(total)


def holds_lock(job_ids: Iterable[int], *, releasing_to: Iterable[int] = ()) -> None:
    """Lock the holds of several jobs at once, in id order, and then the available accounts of
    the submitters in `releasing_to` (those whose jobs this transaction may end, so release),
    also in id order; in the caller's transaction.

    A transaction that settles attempts of more than one job (the reaper's batches) calls this
    before its first settlement. Taking the holds one job at a time instead would let it hold
    a shared account (the submitter's, credited when a job it finished releases its hold) while
    it waits for the next job's hold, which a completion of that job holds while it waits for
    the same submitter's account: a deadlock. A completion takes one hold and then the shared
    accounts; with every hold taken first, this transaction is shaped the same way. The
    submitters' accounts are taken here too, in one order, because two such batches (the
    reaper's connections run at once) may end jobs of the same two submitters in opposite
    orders."""
    codes = sorted({job_held_code(job_id) for job_id in job_ids})
    accounts = sorted({available_code(user_id) for user_id in releasing_to})
    # The holds even when there is one: the accounts come after them, as in a completion.
    for batch in (codes, accounts):
        if batch:
            list(
                Account.objects.select_for_update()
                .filter(code__in=batch)
                .order_by("id")
                .values_list("id", flat=True)
            )


# --- Settle -----------------------------------------------------------------------------------

# The inputs that identify one settlement request: a replay must repeat them exactly.
_SETTLE_INPUTS = (
    "job_id",
    "submitter_id",
    "operator_id",
    "price_per_s_minor",
    "runtime_ms",
    "timeout_ms",
    "charge",
)


@dataclass
class HoldLocked:
    """A job's hold as this transaction locked it (`hold_lock`), read in the same statement as
    the accounts its settlements and its release move money to and the fee of the book in force.
    `taken` is what this transaction's settlements have moved out of the hold since the lock, so
    a release later in the same transaction gives back exactly the rest without reading the row
    again."""

    job_id: int
    held: Account | None
    settled_id: int | None
    fee: Fee
    earnings: Account | None = None
    revenue: Account | None = None
    available: Account | None = None
    taken: int = 0

    @property
    def rest(self) -> int:
        """What is still held for the job now, in this transaction."""
        return self.held.balance - self.taken if self.held is not None else 0

    def of_job(self, job_id: int) -> "HoldLocked":
        """This lock, checked to be `job_id`'s hold (a caller passing another job's is a bug)."""
        if self.job_id != job_id:
            raise ValueError(f"the hold locked is job {self.job_id}'s, not job {job_id}'s")
        return self


def hold_lock(
    *,
    job_id: int,
    operator_id: int,
    submitter_id: int,
    attempt_id: int,
    when: datetime,
    fresh: bool,
) -> HoldLocked:
    """Lock the job's hold, reading in the same statement the fee of the book in force at
    `when`, the accounts a charge credits and the submitter's available credits (a release's
    destination); then whether the attempt's settlement key is taken, unless the caller knows it
    cannot be (`fresh`). That lookup must be a statement of its own: one that waited for the
    lock still reads with the snapshot it started with, and would miss the twin it waited for.

    Pass the result to `attempt_settle` and `hold_release` later in the same transaction: they
    then read nothing more, and the caller can do its other work between the lock and the moves
    of the shared accounts (jobs.attempts._settle_and_count says why it does)."""
    names = {
        "held": job_held_code(job_id),
        "earnings": earnings_code(operator_id),
        "revenue": REVENUE,
        "available": available_code(submitter_id),
        "at": when,
    }
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "hold_lock"), names)
        row = cursor.fetchone()
    settled_id = None
    if not fresh:
        key = settle_key(attempt_id)
        settled_id = Event.objects.filter(idempotency_key=key).values_list("pk", flat=True).first()
    if row is None:  # nothing was ever held for this job
        return HoldLocked(job_id, None, settled_id, fee_at(when))
    book_id, fee_bps = row[-2:]
    if book_id is None:
        raise NoRulesInForce(f"no price book is in force at {when.isoformat()}")
    held, earnings, revenue, available = writes.accounts_from_row(row, 4)
    return HoldLocked(job_id, held, settled_id, Fee(book_id, fee_bps), earnings, revenue, available)


def attempt_settle(
    *,
    attempt_id: int,
    job_id: int,
    submitter_id: int,
    operator_id: int,
    price_per_s_minor: int,
    runtime_ms: int,
    timeout_ms: int,
    charge: bool = True,
    priced_at: datetime | None = None,
    tier: str | None = "",
    region: str | None = "",
    job_kind: str | None = DEFAULT_JOB_KIND,
    node_id: int | None = None,
    actor: str = "system",
    fresh: bool = False,
    locked: HoldLocked | None = None,
) -> Entry | None:
    """Settle one attempt, exactly once (idempotency key `settle:attempt:<id>`).

    `locked`: the job's hold as the caller already locked it in this transaction
    (`hold_lock`); without it, it is locked here.

    `fresh`: the caller moved the attempt out of an active state in this very transaction
    (compare-and-set or row lock), so it cannot have been settled before and the lookup of an
    earlier settlement is skipped. The unique idempotency key still stands behind that.

    cost = floor(price_per_s_minor * min(runtime_ms, timeout_ms) / 1000), charged only if
    `charge` (an infrastructure failure is not) and never more than is still held for the job.
    The platform fee is floor(charged * fee bps / 10000) under the price book in force at
    `priced_at` (the claim time: the price and the fee are fixed when the node takes the work;
    now if omitted); the operator gets the rest. Every input and rule figure goes into the
    AttemptSettled event, so `settlement_recompute` can redo the sum.

    Returns the entry, or None when nothing was charged (the event is still written: the
    attempt is settled at zero). A replay returns the original and moves nothing; a replay with
    different inputs is an IdempotencyConflict.
    """
    for name, value in (("attempt_id", attempt_id), ("job_id", job_id)):
        _require(name, value, minimum=1)
    _require("submitter_id", submitter_id, minimum=1)
    _require("operator_id", operator_id, minimum=1)
    _require("price_per_s_minor", price_per_s_minor)
    _require("runtime_ms", runtime_ms)
    _require("timeout_ms", timeout_ms)
    if type(charge) is not bool:
        raise DomainError("charge must be a boolean", fields={"charge": ["true or false"]})
    if priced_at is not None and timezone.is_naive(priced_at):
        raise ValueError("priced_at must be timezone-aware")
    key = settle_key(attempt_id)
    inputs: dict[str, Any] = {
        "job_id": job_id,
        "submitter_id": submitter_id,
        "operator_id": operator_id,
        "price_per_s_minor": price_per_s_minor,
        "runtime_ms": runtime_ms,
        "timeout_ms": timeout_ms,
        "charge": charge,
    }
    with transaction.atomic(savepoint=False):
        # Serialises every settlement of this job, so a twin fired concurrently waits here and
        # then finds the first one's event below instead of failing on the unique key.
        when = priced_at or timezone.now()
        if locked is None:
            locked = hold_lock(
                job_id=job_id,
                operator_id=operator_id,
                submitter_id=submitter_id,
                attempt_id=attempt_id,
                when=when,
                fresh=fresh,
            )
        else:
            locked.of_job(job_id)
        held, book = locked.held, locked.fee
        original = (
            Event.objects.filter(idempotency_key=key).first()
            if locked.settled_id is not None
            else None
        )
        if original is not None:
            if any(original.payload[name] != inputs[name] for name in _SETTLE_INPUTS):
                raise IdempotencyConflict(
                    f"attempt {attempt_id} was already settled with different figures"
                )
            return _entry_of(original)
        if held is not None and held.owner_id != submitter_id:
            raise DomainError(f"job {job_id}'s hold belongs to another submitter")
        held_before = locked.rest
        billed = quotes.billed_ms(runtime_ms=runtime_ms, timeout_ms=timeout_ms)
        cost = quotes.cost_minor(price_per_s_minor=price_per_s_minor, billed_ms=billed)
        charged = min(cost, held_before) if charge else 0
        split = quotes.fee_split(cost=charged, fee_bps=book.platform_fee_bps)
        payload = {
            "attempt_id": attempt_id,
            **inputs,
            "node_id": node_id,
            "billed_ms": billed,
            "held_before_minor": held_before,
            "cost_minor": cost if charge else 0,
            "charged_minor": split.cost,
            "fee_minor": split.fee,
            "operator_minor": split.operator,
            "fee_bps": book.platform_fee_bps,
            "book_version": book.version,
            "priced_at": when.isoformat(),
            # Descriptive only (the price already carries them); blank when the caller has none.
            "tier": tier or "",
            "region": region or "",
            "job_kind": job_kind or DEFAULT_JOB_KIND,
        }
        stream = key
        if split.cost == 0:
            event_append(
                stream=stream,
                type="AttemptSettled",
                payload=payload,
                actor=actor,
                expected_version=0,
                idempotency_key=key,
                key_checked=True,
            )
            return None
        earnings = locked.earnings or account_ensure(
            code=earnings_code(operator_id), kind=AccountKind.EARNINGS, owner_id=operator_id
        )
        revenue = locked.revenue or system_account(REVENUE)
        legs = [Leg(held, -split.cost)]
        if split.operator:
            legs.append(Leg(earnings, split.operator))
        if split.fee:
            legs.append(Leg(revenue, split.fee))
        entry = entry_post(
            kind="settlement",
            legs=legs,
            stream=stream,
            expected_version=0,
            event_type="AttemptSettled",
            payload=payload,
            actor=actor,
            idempotency_key=key,
            key_checked=True,
        )
        locked.taken += split.cost
        return entry


def spot_check_settle(
    *,
    attempt_id: int,
    job_id: int,
    operator_id: int,
    price_per_s_minor: int,
    runtime_ms: int,
    timeout_ms: int,
    priced_at: datetime,
    node_id: int,
    actor: str = "system:verification",
) -> Entry | None:
    """Settle a spot-check's attempt, paid by the platform (jobs.verification): the operator
    earns what the same work earns when a submitter pays (the cost at its price, less the fee
    of the book in force when it claimed), from `platform:verification`, not from any hold.

    The same idempotency key and stream as `attempt_settle` (`settle:attempt:<id>`, version 0):
    an attempt is settled once, one way or the other."""
    for name, value in (("attempt_id", attempt_id), ("job_id", job_id)):
        _require(name, value, minimum=1)
    _require("operator_id", operator_id, minimum=1)
    key = settle_key(attempt_id)
    billed = quotes.billed_ms(runtime_ms=runtime_ms, timeout_ms=timeout_ms)
    cost = quotes.cost_minor(price_per_s_minor=price_per_s_minor, billed_ms=billed)
    book = fee_at(priced_at)
    split = quotes.fee_split(cost=cost, fee_bps=book.platform_fee_bps)
    payload = {
        "attempt_id": attempt_id,
        "job_id": job_id,
        "operator_id": operator_id,
        "node_id": node_id,
        "price_per_s_minor": price_per_s_minor,
        "runtime_ms": runtime_ms,
        "timeout_ms": timeout_ms,
        "billed_ms": billed,
        "cost_minor": cost,
        "operator_minor": split.operator,
        "fee_bps": book.platform_fee_bps,
        "book_version": book.version,
        "priced_at": priced_at.isoformat(),
    }
    if split.operator == 0:
        event_append(
            stream=key,
            type="SpotCheckSettled",
            payload=payload,
            actor=actor,
            expected_version=0,
            idempotency_key=key,
        )
        return None
    earnings = account_ensure(
        code=earnings_code(operator_id), kind=AccountKind.EARNINGS, owner_id=operator_id
    )
    return entry_post(
        kind="spot_check",
        legs=[Leg(system_account(VERIFICATION), -split.operator), Leg(earnings, split.operator)],
        stream=key,
        expected_version=0,
        event_type="SpotCheckSettled",
        payload=payload,
        actor=actor,
        idempotency_key=key,
    )


@dataclass(frozen=True)
class SettlementFigures:
    billed_ms: int
    cost_minor: int
    charged_minor: int
    fee_minor: int
    operator_minor: int
    fee_bps: int
    book_version: int


def settlement_recompute(record: Entry | Event, *, rules: Rules | None = None) -> SettlementFigures:
    """Redo a settlement's arithmetic from its recorded inputs and its price book (pass `rules`
    to reuse a book already read)."""
    event = record.event if isinstance(record, Entry) else record
    if event.type != "AttemptSettled":
        raise DomainError(f"event {event.pk} is a {event.type}, not a settlement")
    p = event.payload
    if rules is None or rules.version != p["book_version"]:
        rules = rules_version(p["book_version"])
    billed = quotes.billed_ms(runtime_ms=p["runtime_ms"], timeout_ms=p["timeout_ms"])
    cost = quotes.cost_minor(price_per_s_minor=p["price_per_s_minor"], billed_ms=billed)
    if not p["charge"]:
        cost = 0
    split = quotes.fee_split(cost=min(cost, p["held_before_minor"]), fee_bps=rules.platform_fee_bps)
    return SettlementFigures(
        billed_ms=billed,
        cost_minor=cost,
        charged_minor=split.cost,
        fee_minor=split.fee,
        operator_minor=split.operator,
        fee_bps=rules.platform_fee_bps,
        book_version=rules.version,
    )


def settlement_check(event: Event, figures: SettlementFigures | None = None) -> list[str]:
    """Where the recorded figures differ from their recomputation (empty: they agree). That the
    postings move those figures is the payload's own check (ledger.events)."""
    figures = figures or settlement_recompute(event)
    p = event.payload
    return [
        f"settlement {event.pk} (attempt {p['attempt_id']}): {name} recorded {p[name]}, "
        f"recomputed {getattr(figures, name)}"
        for name in (
            "billed_ms",
            "cost_minor",
            "charged_minor",
            "fee_minor",
            "operator_minor",
            "fee_bps",
        )
        if p[name] != getattr(figures, name)
    ]


@dataclass(frozen=True)
class SettlementRecord:
    attempt_id: int
    event_id: int
    charged_minor: int
    operator_minor: int
    fee_minor: int
    charge: bool
    recorded_at: datetime


def settlements_for_attempts(attempt_ids: Iterable[int]) -> dict[int, SettlementRecord]:
    """The settlement of each attempt that has one (for the jobs app's invariant: every ended
    attempt settled exactly once). One indexed query per 1000 attempts."""
    ids = list(attempt_ids)
    found: dict[int, SettlementRecord] = {}
    for start in range(0, len(ids), 1000):
        keys = [settle_key(a) for a in ids[start : start + 1000]]
        for event in Event.objects.filter(idempotency_key__in=keys).only(
            "id", "payload", "recorded_at"
        ):
            p = event.payload
            found[p["attempt_id"]] = SettlementRecord(
                attempt_id=p["attempt_id"],
                event_id=event.pk,
                charged_minor=p["charged_minor"],
                operator_minor=p["operator_minor"],
                fee_minor=p["fee_minor"],
                charge=p["charge"],
                recorded_at=event.recorded_at,
            )
    return found


# --- Release ----------------------------------------------------------------------------------


def hold_release(
    *, job_id: int, submitter_id: int, actor: str, locked: HoldLocked | None = None
) -> Entry | None:
    """Give back whatever is still held for `job_id` (held → available) when the job ends.

    `locked`: the job's hold as the caller locked it earlier in this transaction
    (`hold_lock`), with what its settlements have taken since; without it, the hold is locked
    and read here.

    Idempotent: with nothing held (already released, fully spent, never held) it writes
    nothing and returns None. A settlement after the release finds nothing held and charges
    nothing.
    """
    _require("job_id", job_id, minimum=1)
    _require("submitter_id", submitter_id, minimum=1)
    with transaction.atomic(savepoint=False):
        code = available_code(submitter_id)
        if locked is None:
            held, available = writes.account_lock_with(job_held_code(job_id), code)
            rest = held.balance if held is not None else 0
        else:
            held, available, rest = locked.held, locked.available, locked.of_job(job_id).rest
        if held is None or rest == 0:
            return None
        if held.owner_id != submitter_id:
            raise DomainError(f"job {job_id}'s hold belongs to another submitter")
        available = available or account_ensure(
            code=code, kind=AccountKind.AVAILABLE, owner_id=submitter_id
        )
        entry = entry_post(
            kind="release",
            legs=[Leg(held, -rest), Leg(available, rest)],
            stream=hold_key(job_id),
            event_type="CreditsReleased",
            payload={
                "job_id": job_id,
                "submitter_id": submitter_id,
                "amount_minor": rest,
            },
            actor=actor,
        )
        if locked is not None:
            locked.taken += rest
        return entry
