"""Writes to the log and the books. Every app calls these inside its own transaction.

`event_append` is the one way an event is written; `entry_post` is the one way money moves:
it appends the event that records the entry, writes the postings and moves the projected
balances, all in the caller's transaction, so the change and its record commit together.
"""

import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from django.db import IntegrityError, connection, transaction
from django.db.models import Sum
from django.utils import timezone

from ledger import metrics, registry, writes
from ledger.errors import (
    IdempotencyConflict,
    InsufficientFunds,
    InvalidEvent,
    UnbalancedEntry,
    VersionConflict,
)
from ledger.models import CREDITS, Account, AccountKind, Entry, Event, Posting


def _require_transaction(what: str) -> None:
    if not connection.in_atomic_block:
        raise RuntimeError(
            f"{what} must run inside transaction.atomic(): the change and its "
            "event have to commit together"
        )


@dataclass(frozen=True)
class NewEvent:
    """One event to append: at the end of its stream, or after `expected_version` (the version
    its stream has before it, as the caller saw it: of two events of one stream in one call,
    the second names the first's version)."""

    stream: str
    type: str
    payload: dict[str, Any]
    actor: str
    expected_version: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Appended:
    """What the log gave an appended event."""

    id: int
    version: int
    fingerprint: str | None  # only for an event written under an idempotency key


def event_append(
    *,
    stream: str,
    type: str,
    payload: dict[str, Any],
    actor: str,
    expected_version: int | None = None,
    idempotency_key: str | None = None,
    key_checked: bool = False,
    recorded_at: datetime | None = None,
) -> Event:
    """Append one event to `stream` (`events_append_bulk` for one).

    With `expected_version` (the version the caller last saw, 0 for a new stream) the write
    fails with VersionConflict if anyone appended since; without it the event goes at the end.
    With `idempotency_key`: the same key with the same payload returns the original event
    (`event.replayed` is True); the same key with anything else raises IdempotencyConflict.
    `key_checked`: the caller has just found the key unused, under a lock that orders its
    twins, so it is not looked up again (the unique index still refuses a duplicate).
    """
    _require_transaction("event_append")
    if idempotency_key is not None and not key_checked:
        original = _replayed(stream, type, payload, idempotency_key)
        if original is not None:
            return original
    new = NewEvent(stream, type, payload, actor, expected_version, idempotency_key)
    at = recorded_at or timezone.now()
    (appended,) = events_append_bulk([new], recorded_at=at)
    return _event_of(new, appended, at)


def _event_of(new: NewEvent, appended: Appended, at: datetime) -> Event:
    event = Event(
        stream=new.stream,
        version=appended.version,
        type=new.type,
        schema_version=registry.get(new.type).schema_version,
        payload=new.payload,
        actor=new.actor,
        idempotency_key=new.idempotency_key,
        fingerprint=appended.fingerprint,
        recorded_at=at,
    )
    event.replayed = False
    return _as_saved(event, appended.id)


def _as_saved(instance: Any, pk: int) -> Any:
    """A model instance the ledger's own statement has just written, as the ORM leaves one it
    saved: its primary key set, no longer `adding`."""
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


def _replayed(stream: str, type: str, payload: dict[str, Any], key: str) -> Event | None:
    """The event written under `key` for this same request (`replayed` True), None when the
    key is unused; IdempotencyConflict when it was used for another request. The request's
    fingerprint is the log's own (`ledger_fingerprint`), asked of the database."""
    registry.validate(type, payload)
    found = writes.event_by_key(key, stream, type, json.dumps(payload))
    if found is None:
        return None
    event_id, same = found
    if not same:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for a different request"
        )
    original = Event.objects.get(pk=event_id)
    original.replayed = True
    return original


def events_append_bulk(
    events: Sequence[NewEvent], *, recorded_at: datetime | None = None
) -> list[Appended]:
    """Append `events` in one call of the log's `ledger_append`, in the caller's transaction.

    Versions are the ledger's (see NewEvent); a collision on a version or a key fails the whole
    call with VersionConflict or IdempotencyConflict, and nothing of it is written. Keys are
    not looked up here: a replay is `event_append`'s to answer. Returns, in order, each event's
    id, version and fingerprint (None for an event without a key).
    """
    _require_transaction("events_append_bulk")
    if not events:
        return []
    # A set-based caller passes one payload object for every event of a kind: validate (and
    # serialise) each object once, not once per event. `events` holds every payload alive, so
    # no id is reused within the loop.
    prepared: dict[tuple[str, int], tuple[int, str]] = {}
    columns: tuple[list, ...] = ([], [], [], [], [], [], [])
    streams, types, schemas, payloads, actors, expected, keys = columns
    for new in events:
        cached = (new.type, id(new.payload))
        if cached not in prepared:
            prepared[cached] = event_prepared(new.type, new.payload)
        schema_version, payload_json = prepared[cached]
        streams.append(new.stream)
        types.append(new.type)
        schemas.append(schema_version)
        payloads.append(payload_json)
        actors.append(new.actor)
        expected.append(new.expected_version)
        keys.append(new.idempotency_key)
    try:
        rows = writes.events_append(*columns, recorded_at or timezone.now())
    except IntegrityError as exc:
        event_write_refused(exc, events)
    return [Appended(*row) for row in rows]


def event_prepared(type: str, payload: dict[str, Any]) -> tuple[int, str]:
    """An event's payload validated against its type's schema: (schema version, payload as
    JSON), what `ledger_append` takes for it. Also for a set-based statement of another app
    that calls `ledger_append` itself (the reaper's), for the payloads it will write."""
    event_type = registry.validate(type, payload)
    return event_type.schema_version, json.dumps(payload)


def event_write_refused(exc: IntegrityError, events: Sequence[NewEvent]) -> NoReturn:
    """Raise what a unique violation on appending `events` means to the caller."""
    # The transaction is unusable on PostgreSQL after this; the caller's atomic block rolls
    # back and nothing of the request is written.
    transaction.set_rollback(True)
    for new in events:
        key = new.idempotency_key
        if key is not None and _twin_of_key(exc, new.stream, key):
            raise IdempotencyConflict(
                f"idempotency key {key!r} is being used by a concurrent request"
            ) from None
    if len(events) == 1:
        (new,) = events
        # The version the caller expected (none: its end).
        seen = "its end" if new.expected_version is None else f"version {new.expected_version}"
        message = f"stream {new.stream} moved past {seen} while this change was being made"
    else:
        message = "a stream moved while a batch of events was being written"
    raise VersionConflict(message) from None


def _twin_of_key(exc: IntegrityError, stream: str, key: str) -> bool:
    """Whether a unique violation says that a twin request with the same idempotency key got in
    first: either the key's own index, or the stream's version on a stream named after the key
    (`settle:attempt:7`, `topup:<key>`), which the twin's event took. PostgreSQL reports the
    first index it finds violated, and which that is depends on the indexes' ages, so both
    count. Read from the constraint's name, not the message (which quotes the key)."""
    cause = exc.__cause__
    name = getattr(getattr(cause, "diag", None), "constraint_name", None)
    on_key, on_version = name == "event_idempotency_key", name == "event_stream_version"
    return on_key or (on_version and key in stream)


# --- Accounts ---------------------------------------------------------------------------------

_EXTERNAL_KINDS = {AccountKind.FUNDING, AccountKind.PAYOUTS}
_UNPROJECTED_KINDS = {AccountKind.REVENUE, AccountKind.FUNDING, AccountKind.PAYOUTS}


def account_open(
    *,
    code: str,
    kind: str,
    owner_id: int | None = None,
    currency: str = CREDITS,
    allow_negative: bool | None = None,
    actor: str = "system",
    new: bool = False,
) -> Account:
    """Return the account `code`, opening it (with an AccountOpened event) if it is new.

    `new`: the code names something the caller created in this very transaction (an inference
    request's hold), so nobody can have opened it and the lookup is skipped; the AccountOpened
    event's version and the unique code still refuse a second opening."""
    _require_transaction("account_open")
    account = None if new else Account.objects.filter(code=code).first()
    if account is not None:
        return account
    if allow_negative is None:
        allow_negative = kind in _EXTERNAL_KINDS
    projected = kind not in _UNPROJECTED_KINDS
    event_append(
        stream=f"account:{code}",
        type="AccountOpened",
        actor=actor,
        expected_version=0,
        payload={
            "code": code,
            "kind": kind,
            "currency": currency,
            "owner_id": owner_id,
            "allow_negative": allow_negative,
            "projected": projected,
        },
    )
    return Account.objects.create(
        code=code,
        kind=kind,
        owner_id=owner_id,
        currency=currency,
        allow_negative=allow_negative,
        projected=projected,
    )


# --- Entries ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leg:
    account: Account
    amount: int


def _check_balanced(legs: Sequence[Leg]) -> None:
    if len(legs) < 2:
        raise UnbalancedEntry("an entry needs at least two postings")
    sums: dict[str, int] = defaultdict(int)
    for leg in legs:
        if type(leg.amount) is not int:
            raise UnbalancedEntry(f"amount {leg.amount!r} is not an integer number of minor units")
        if leg.amount == 0:
            raise UnbalancedEntry("a posting of zero moves nothing")
        sums[leg.account.currency] += leg.amount
    unbalanced = {cur: total for cur, total in sums.items() if total != 0}
    if unbalanced:
        raise UnbalancedEntry(f"postings do not sum to zero: {unbalanced}")


def _deltas(legs: Sequence[Leg]) -> list[tuple[Account, int]]:
    """Each account's net movement in the legs, in account-id order (the order rows are
    locked in, so no deadlocks), leaving out the accounts the legs do not move."""
    deltas: dict[int, int] = defaultdict(int)
    by_id: dict[int, Account] = {}
    for leg in legs:
        deltas[leg.account.id] += leg.amount
        by_id[leg.account.id] = leg.account
    return [(by_id[i], deltas[i]) for i in sorted(deltas) if deltas[i]]


def _check_derived_floor(account: Account) -> None:
    """A debit from an unprojected account: lock its row, then sum its postings (this entry's
    included). Credits take no lock, so settlements never queue here; debits are rare."""
    Account.objects.select_for_update().filter(pk=account.pk).values_list("pk").get()
    if (Posting.objects.filter(account=account).aggregate(s=Sum("amount"))["s"] or 0) < 0:
        transaction.set_rollback(True)
        raise InsufficientFunds(f"account {account.code} cannot go below zero")


def entry_post(
    *,
    kind: str,
    legs: Sequence[Leg],
    stream: str,
    event_type: str,
    payload: dict[str, Any],
    actor: str,
    expected_version: int | None = None,
    idempotency_key: str | None = None,
    key_checked: bool = False,
) -> Entry:
    """Record a balanced entry: its event (with the postings in the payload), the entry, its
    postings and the projected balances, in one call of the ledger's `ledger_post`
    (ledger/sql/post.sql), in the caller's transaction; a debit that would take a balance below
    its floor raises InsufficientFunds and leaves the transaction to roll back.

    A replayed idempotency key returns the original entry and moves nothing.
    """
    _require_transaction("entry_post")
    _check_balanced(legs)
    if "postings" in payload:
        raise InvalidEvent("payload must not carry postings: entry_post adds them")
    full_payload = {
        **payload,
        "postings": [[leg.account.code, leg.amount, leg.account.currency] for leg in legs],
    }
    if idempotency_key is not None and not key_checked:
        original = _replayed(stream, event_type, full_payload, idempotency_key)
        if original is not None:
            return Entry.objects.get(event=original)
    new = NewEvent(stream, event_type, full_payload, actor, expected_version, idempotency_key)
    schema_version, payload_json = event_prepared(new.type, new.payload)
    deltas = _deltas(legs)
    moves = [(account, delta) for account, delta in deltas if account.projected]
    at = timezone.now()
    try:
        *appended, entry_id, refused = writes.entry_post(
            event=(new.stream, new.type, schema_version, payload_json, new.actor,
                   new.expected_version, new.idempotency_key),
            recorded_at=at,
            kind=kind,
            postings=[(leg.account.pk, leg.amount, leg.account.currency) for leg in legs],
            moves=[(account.pk, delta) for account, delta in moves],
        )  # fmt: skip
    except IntegrityError as exc:
        event_write_refused(exc, [new])
    if refused is not None:
        transaction.set_rollback(True)
        account, delta = next((a, d) for a, d in moves if a.pk == refused)
        raise InsufficientFunds(f"account {account.code} cannot go below zero (needs {-delta})")
    # Debits from unprojected accounts that must not go negative: their floor is a sum of
    # postings (this entry's included), checked under a lock of their own after the projected
    # moves, in id order; credits to them take no lock, so settlements never queue here.
    for account, delta in deltas:
        if not account.projected and delta < 0 and not account.allow_negative:
            _check_derived_floor(account)
    metrics.entry_counted(
        kind, [(leg.account.kind, leg.amount, leg.account.currency) for leg in legs]
    )
    entry = Entry(event=_event_of(new, Appended(*appended), at), kind=kind, created_at=at)
    return _as_saved(entry, entry_id)


def transfer(
    *,
    source: Account,
    destination: Account,
    amount: int,
    actor: str,
    memo: str = "",
    kind: str = "transfer",
    idempotency_key: str | None = None,
) -> Entry:
    """Move `amount` minor units from one account to another as a TransferPosted entry."""
    if type(amount) is not int or amount <= 0:
        raise UnbalancedEntry("a transfer amount must be a positive integer")
    with transaction.atomic():
        return entry_post(
            kind=kind,
            legs=[Leg(source, -amount), Leg(destination, amount)],
            # A stream of its own: transfers between the same accounts never contend on a version.
            stream=f"transfer:{idempotency_key or uuid.uuid4().hex}",
            expected_version=0,
            event_type="TransferPosted",
            payload={"memo": memo, "kind": kind},
            actor=actor,
            idempotency_key=idempotency_key,
        )


def account_balance(account: Account) -> int:
    """The balance, whether projected or derived from postings."""
    if account.projected:
        return Account.objects.values_list("balance", flat=True).get(pk=account.pk)
    return Posting.objects.filter(account=account).aggregate(s=Sum("amount"))["s"] or 0
