"""The log's and the books' row writes as hand-written statements.

Every task pays for several of these (its events, its settlement's entry and postings, the
balances it moves, the accounts it reads). The ORM built each statement anew per call, and that
building was the largest item in every hot-path profile (docs/benchmarks.md §7). The rows and
the checks are the ORM's: values go through the backend's own adapters, so SQLite (the embedded
default) stores exactly what the ORM would, and the models come back through `from_db`.
"""

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

from django.db import connection

from ledger.models import Account, Entry, Event

if TYPE_CHECKING:
    from ledger.services import Leg, NewEvent

_ENTRY_INSERT = (
    "INSERT INTO ledger_entry (event_id, kind, created_at) VALUES (%s, %s, %s) RETURNING id"
)
_POSTING_INSERT = "INSERT INTO ledger_posting (entry_id, account_id, amount, currency) VALUES "
# The row lock and the floor check in one statement: two concurrent debits can never both pass
# a check made on a stale read.
_BALANCE_MOVE = (
    "UPDATE ledger_account SET balance = balance + %s "
    "WHERE id = %s AND (allow_negative OR balance >= %s)"
)
ACCOUNT_COLUMNS = (
    "id", "code", "kind", "owner_id", "currency", "balance", "allow_negative", "projected",
)  # fmt: skip


def _saved(instance, pk: int) -> None:
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias


# The log's one door (ledger/sql/append.sql): arrays, one element per event. Up to
# _ELEMENTS_FROM events each array is written out element by element (`ARRAY[%s, %s]`, one text
# per count, built once): psycopg dumps plain values far cheaper than lists, and most calls
# write one or two events. From then on each array is one parameter.
_ELEMENTS_FROM = 9
_APPEND = (
    "SELECT id, version, fingerprint FROM ledger_append(%s::text[], %s::text[], %s::int[], "
    "%s::text[]::jsonb[], %s::text[], %s::int[], %s::text[], %s)"
)


@cache
def _append_elements(count: int) -> str:
    one = "ARRAY[" + ", ".join(["%s"] * count) + "]"
    return (
        f"SELECT id, version, fingerprint FROM ledger_append({one}::text[], {one}::text[], "  # noqa: S608 - placeholders only
        f"{one}::int[], {one}::jsonb[], {one}::text[], {one}::int[], {one}::text[], %s)"
    )


def events_append(
    streams: list, types: list, schemas: list, payloads: list, actors: list, expected: list,
    keys: list, recorded_at: datetime,
) -> list[tuple[int, int, str]]:  # fmt: skip
    """Call `ledger_append` (payloads as JSON text): each event's id, version and fingerprint."""
    columns = (streams, types, schemas, payloads, actors, expected, keys)
    count = len(streams)
    if count < _ELEMENTS_FROM:
        sql, params = _append_elements(count), [v for column in columns for v in column]
    else:
        sql, params = _APPEND, list(columns)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, recorded_at])
        return cursor.fetchall()


# The event written under a key, and whether a request's (stream, type, payload) has its
# fingerprint, by the log's one rule.
_BY_KEY = (
    "SELECT id, fingerprint = ledger_fingerprint(%s, %s, %s::jsonb) "
    "FROM ledger_event WHERE idempotency_key = %s"
)


def event_by_key(key: str, stream: str, type: str, payload_json: str) -> tuple[int, bool] | None:
    """The id of the event written under `key` and whether the request (stream, type, payload)
    is the same one; None when the key is unused."""
    with connection.cursor() as cursor:
        cursor.execute(_BY_KEY, [stream, type, payload_json, key])
        return cursor.fetchone()


def event_id_by_key(idempotency_key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM ledger_event WHERE idempotency_key = %s", [idempotency_key])
        row = cursor.fetchone()
    return row[0] if row else None


# PostgreSQL writes the entry and its postings in one statement (a data-modifying CTE);
# SQLite has none, and takes two.
_ENTRY_WITH_POSTINGS = (
    "WITH e AS (" + _ENTRY_INSERT + ") "  # noqa: S608 - column names are ours
    "INSERT INTO ledger_posting (entry_id, account_id, amount, currency) "
    "SELECT e.id, v.account_id, v.amount, v.currency FROM e, (VALUES {rows}) "
    "AS v (account_id, amount, currency) RETURNING entry_id"
)


def entry_insert(*, event: Event, kind: str, legs: "Sequence[Leg]") -> Entry:
    """The entry row of `event` and its postings (one statement on PostgreSQL, two elsewhere,
    whatever the legs)."""
    entry = Entry(event=event, kind=kind, created_at=event.recorded_at)
    head = [event.pk, kind, connection.ops.adapt_datetimefield_value(entry.created_at)]
    postings: list = []
    for leg in legs:
        postings += [leg.account.pk, leg.amount, leg.account.currency]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = ", ".join(["(%s::bigint, %s::bigint, %s::varchar)"] * len(legs))
            cursor.execute(_ENTRY_WITH_POSTINGS.format(rows=rows), head + postings)
            _saved(entry, cursor.fetchone()[0])
            return entry
        cursor.execute(_ENTRY_INSERT, head)
        _saved(entry, cursor.fetchone()[0])
        params: list = []
        for i in range(0, len(postings), 3):
            params += [entry.pk, *postings[i : i + 3]]
        cursor.execute(_POSTING_INSERT + ", ".join(["(%s, %s, %s, %s)"] * len(legs)), params)
    return entry


_ENTRY_PART = (
    "en AS (INSERT INTO ledger_entry (event_id, kind, created_at) "
    "SELECT ev.id, %s, %s FROM ev RETURNING id)"
)
_POSTINGS_PART = (
    "po AS (INSERT INTO ledger_posting (entry_id, account_id, amount, currency) "
    "SELECT en.id, v.account_id, v.amount, v.currency FROM en, (VALUES {rows}) "
    "AS v (account_id, amount, currency))"
)
_MOVE_PART = (
    "{name} AS (UPDATE ledger_account SET balance = balance + %s WHERE id = %s "
    "AND (allow_negative OR balance >= %s) AND EXISTS (SELECT 1 FROM {before}) RETURNING id)"
)
_EVENT_PART = (
    "WITH ev AS MATERIALIZED (SELECT * FROM ledger_append(ARRAY[%s]::text[], ARRAY[%s]::text[], "
    "ARRAY[%s]::int[], ARRAY[%s::jsonb], ARRAY[%s]::text[], ARRAY[%s]::int[], "
    "ARRAY[%s]::text[], %s))"
)
_COUNT_PART = "(SELECT count(*) FROM {name})"
_RESULT_PART = " SELECT ev.id, ev.version, ev.fingerprint, en.id, {counted} FROM ev, en"


def entry_post_at_once(
    *,
    new: "NewEvent",
    schema_version: int,
    payload_json: str,
    recorded_at: datetime,
    kind: str,
    legs: "Sequence[Leg]",
    moves: Sequence[tuple[int, int]],
) -> tuple[tuple[int, int, str], int, int]:
    """Append `new` through the log's door (`ledger_append`, called by the same statement),
    INSERT its entry and postings, and apply `moves` ((account id, delta) of projected
    balances, in id order) in one statement. Each move reads the one before it, so they run,
    and lock their rows, in that order; a move whose floor would be crossed stops the ones
    after it. Returns the event's (id, version, fingerprint), the entry's id, and how many moves
    were applied: fewer than `moves` means a floor was crossed, and the caller must roll the
    transaction back."""
    event = [new.stream, new.type, schema_version, payload_json, new.actor]
    params: list = [*event, new.expected_version, new.idempotency_key, recorded_at]
    params += [kind, recorded_at]
    for leg in legs:
        params += [leg.account.pk, leg.amount, leg.account.currency]
    # Only placeholders and fixed names are formatted into the text; every value is a parameter.
    rows = ", ".join(["(%s::bigint, %s::bigint, %s::varchar)"] * len(legs))
    parts = [_EVENT_PART, _ENTRY_PART, _POSTINGS_PART.format(rows=rows)]
    before = "en"
    for i, (account_id, delta) in enumerate(moves):
        parts.append(_MOVE_PART.format(name=f"m{i}", before=before))
        params += [delta, account_id, -delta]
        before = f"m{i}"
    counted = " + ".join(_COUNT_PART.format(name=f"m{i}") for i in range(len(moves))) or "0"
    sql = ", ".join(parts) + _RESULT_PART.format(counted=counted)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        event_id, version, fingerprint, entry_id, moved = cursor.fetchone()
    return (event_id, version, fingerprint), entry_id, moved


def balance_add(account_id: int, delta: int) -> bool:
    """Add `delta` to a projected balance unless that takes it below its floor (False)."""
    with connection.cursor() as cursor:
        cursor.execute(_BALANCE_MOVE, [delta, account_id, -delta])
        return cursor.rowcount == 1


def account_from_row(row: Sequence) -> Account:
    """An Account from the columns of ACCOUNT_COLUMNS, in that order."""
    values = list(row)
    return Account.from_db(connection.alias, ACCOUNT_COLUMNS, values)


def account_lock_with(code: str, other: str) -> tuple[Account | None, Account | None]:
    """The account `code` with its row locked until the transaction ends (PostgreSQL; on SQLite
    the writer already holds the database), and in the same statement the account `other`
    (read, not locked); each None where there is none."""
    columns = ", ".join(f"{alias}.{c}" for alias in "lo" for c in ACCOUNT_COLUMNS)
    sql = (
        f"SELECT {columns} FROM ledger_account l "  # noqa: S608 - column names are ours
        "LEFT JOIN ledger_account o ON o.code = %s WHERE l.code = %s"
    )
    sql += " FOR UPDATE OF l"
    with connection.cursor() as cursor:
        cursor.execute(sql, [other, code])
        row = cursor.fetchone()
    if row is None:
        return None, None
    width = len(ACCOUNT_COLUMNS)
    found = account_from_row(row[width:]) if row[width] is not None else None
    return account_from_row(row[:width]), found
