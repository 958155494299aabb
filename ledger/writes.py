"""The ledger's statements that are not plain ORM: calls of its functions (ledger/sql/append.sql,
post.sql) and the account reads that lock. Values go through psycopg's adapters as the ORM's
would, and accounts come back through `Model.from_db`, as a queryset's do."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from core.sql import statement
from ledger.models import Account

# The columns of an account, in the order `account_from_row` takes them (the order the account
# statements in ledger/sql select them).
ACCOUNT_COLUMNS = (
    "id", "code", "kind", "owner_id", "currency", "balance", "allow_negative", "projected",
)  # fmt: skip

_APPEND = (
    "SELECT id, version, fingerprint FROM ledger_append(%s::text[], %s::text[], %s::int[], "
    "%s::text[]::jsonb[], %s::text[], %s::int[], %s::text[], %s)"
)
# One event, as most appends are, goes as plain values made into the function's arrays by the
# statement: psycopg works out a list's element type in Python for each list it sends, about
# ten times what a plain value costs, and an append sends seven.
_APPEND_ONE = (
    "SELECT id, version, fingerprint FROM ledger_append(ARRAY[%s::text], ARRAY[%s::text], "
    "ARRAY[%s::int], ARRAY[%s::jsonb], ARRAY[%s::text], ARRAY[%s::int], ARRAY[%s::text], %s)"
)
_POST = (
    "SELECT event_id, event_version, event_fingerprint, entry_id, refused FROM ledger_post("
    "%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s::bigint[], %s::bigint[], %s::text[], "
    "%s::bigint[], %s::bigint[])"
)
# The event written under a key, and whether a request's (stream, type, payload) has its
# fingerprint, by the log's one rule.
_BY_KEY = (
    "SELECT id, fingerprint = ledger_fingerprint(%s, %s, %s::jsonb) "
    "FROM ledger_event WHERE idempotency_key = %s"
)


def events_append(
    streams: list, types: list, schemas: list, payloads: list, actors: list, expected: list,
    keys: list, recorded_at: datetime,
) -> list[tuple[int, int, str]]:  # fmt: skip
    """Call `ledger_append` (payloads as JSON text): each event's id, version and fingerprint."""
    columns = [streams, types, schemas, payloads, actors, expected, keys]
    if len(streams) == 1:
        sql, params = _APPEND_ONE, [column[0] for column in columns]
    else:
        sql, params = _APPEND, columns
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, recorded_at])
        return cursor.fetchall()


def entry_post(
    *,
    event: Sequence[Any],
    recorded_at: datetime,
    kind: str,
    postings: Sequence[tuple[int, int, str]],
    moves: Sequence[tuple[int, int]],
) -> tuple[int, int, str, int, int | None]:
    """Call `ledger_post`: `event` is (stream, type, schema version, payload JSON, actor,
    expected version, idempotency key), `postings` (account id, amount, currency), `moves`
    (account id, delta). Returns the event's id, version and fingerprint, the entry's id, and
    the account whose move would have crossed its floor (None when every move applied)."""
    accounts, amounts, currencies = (list(column) for column in zip(*postings, strict=True))
    move_accounts = [account_id for account_id, _ in moves]
    move_deltas = [delta for _, delta in moves]
    params = [*event, recorded_at, kind, accounts, amounts, currencies, move_accounts, move_deltas]
    with connection.cursor() as cursor:
        cursor.execute(_POST, params)
        return cursor.fetchone()


def event_by_key(key: str, stream: str, type: str, payload_json: str) -> tuple[int, bool] | None:
    """The id of the event written under `key` and whether the request (stream, type, payload)
    is the same one; None when the key is unused."""
    with connection.cursor() as cursor:
        cursor.execute(_BY_KEY, [stream, type, payload_json, key])
        return cursor.fetchone()


def account_from_row(row: Sequence) -> Account:
    """An Account from the columns of ACCOUNT_COLUMNS, in that order."""
    return Account.from_db(connection.alias, ACCOUNT_COLUMNS, list(row))


def accounts_from_row(row: Sequence, count: int) -> list[Account | None]:
    """`count` accounts side by side in one row (ACCOUNT_COLUMNS each; None where a LEFT JOIN
    found none)."""
    width = len(ACCOUNT_COLUMNS)
    parts = [row[i * width : (i + 1) * width] for i in range(count)]
    return [account_from_row(part) if part[0] is not None else None for part in parts]


def account_lock_with(code: str, other: str) -> tuple[Account | None, Account | None]:
    """The account `code` with its row locked until the transaction ends, and in the same
    statement the account `other` (read, not locked); each None where there is none."""
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "account_lock_with"), {"code": code, "other": other})
        row = cursor.fetchone()
    if row is None:
        return None, None
    locked, found = accounts_from_row(row, 2)
    return locked, found
