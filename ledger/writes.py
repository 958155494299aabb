"""The log's and the books' row writes as hand-written statements.

Every task pays for several of these (its events, its settlement's entry and postings, the
balances it moves, the accounts it reads). The ORM built each statement anew per call, and that
building was the largest item in every hot-path profile (docs/benchmarks.md §7). The rows and
the checks are the ORM's: values go through the backend's own adapters, so SQLite (the embedded
default) stores exactly what the ORM would, and the models come back through `from_db`.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import connection

from ledger.models import Account, Entry, Event

if TYPE_CHECKING:
    from ledger.services import Leg

_EVENT_COLUMNS = (
    "stream, type, schema_version, payload, actor, idempotency_key, fingerprint, recorded_at, "
    "version"
)
_EVENT_SELECT = f"INSERT INTO ledger_event ({_EVENT_COLUMNS}) SELECT %s, %s, %s, %s, %s, %s, %s, %s"
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


def _event_values(event: Event) -> list:
    ops = connection.ops
    return [
        event.stream,
        event.type,
        event.schema_version,
        ops.adapt_json_value(event.payload, None),
        event.actor,
        event.idempotency_key,
        event.fingerprint,
        ops.adapt_datetimefield_value(event.recorded_at),
    ]


def _event_insert_sql(event: Event) -> tuple[str, list]:
    """The INSERT of `event` (no RETURNING) and its parameters: at its version, or with none
    at its stream's end, the version read in the same statement (a concurrent append to the
    stream collides on the unique version, as it would after a separate read)."""
    values = _event_values(event)
    if event.version is None:
        sql = f"{_EVENT_SELECT}, COALESCE(MAX(version), 0) + 1 FROM ledger_event WHERE stream = %s"
        return sql, [*values, event.stream]
    return f"{_EVENT_SELECT}, %s", [*values, event.version]


def event_insert(event: Event) -> None:
    """INSERT `event` and set its id and version. PostgreSQL's trigger stamps the txid, as for
    the ORM."""
    sql, params = _event_insert_sql(event)
    with connection.cursor() as cursor:
        cursor.execute(sql + " RETURNING id, version", params)
        event_id, event.version = cursor.fetchone()
        _saved(event, event_id)


def event_insert_after_sql(event: Event, source: str, name: str) -> tuple[str, dict]:
    """PostgreSQL: an `INSERT` of `event` (its version set) that writes it once per row of
    `source`, a CTE of the caller's statement that returns one row when the change the event
    records was made, none when it was not; and its parameters, named `<name>_<n>` to fit the
    caller's. Reading `source` also orders the insert after that change."""
    values = [*_event_values(event), event.version]
    names = [f"{name}_{i}" for i in range(len(values))]
    placeholders = ", ".join(f"%({n})s" for n in names)
    sql = (
        f"INSERT INTO ledger_event ({_EVENT_COLUMNS}) "  # noqa: S608 - column names are ours
        f"SELECT {placeholders} FROM {source} RETURNING id"
    )
    return sql, dict(zip(names, values, strict=True))


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

_COUNT_PART = "(SELECT count(*) FROM {name})"
_RESULT_PART = " SELECT ev.id, ev.version, en.id, {counted} FROM ev, en"


def entry_post_at_once(
    *, event: Event, kind: str, legs: "Sequence[Leg]", moves: Sequence[tuple[int, int]]
) -> tuple[Entry, int]:
    """PostgreSQL: INSERT `event`, its entry and postings, and apply `moves` ((account id,
    delta) of projected balances, in id order) in one statement. Each move reads the one before
    it, so they run, and lock their rows, in that order; a move whose floor would be crossed
    stops the ones after it. Returns the entry (its event saved and versioned) and how many
    moves were applied: fewer than `moves` means a floor was crossed, and the caller must roll
    the transaction back."""
    head, params = _event_insert_sql(event)
    entry = Entry(event=event, kind=kind, created_at=event.recorded_at)
    params += [kind, connection.ops.adapt_datetimefield_value(entry.created_at)]
    for leg in legs:
        params += [leg.account.pk, leg.amount, leg.account.currency]
    # Only placeholders and fixed names are formatted into the text; every value is a parameter.
    rows = ", ".join(["(%s::bigint, %s::bigint, %s::varchar)"] * len(legs))
    parts = [
        f"WITH ev AS ({head} RETURNING id, version)",
        _ENTRY_PART,
        _POSTINGS_PART.format(rows=rows),
    ]
    before = "en"
    for i, (account_id, delta) in enumerate(moves):
        parts.append(_MOVE_PART.format(name=f"m{i}", before=before))
        params += [delta, account_id, -delta]
        before = f"m{i}"
    counted = " + ".join(_COUNT_PART.format(name=f"m{i}") for i in range(len(moves))) or "0"
    sql = ", ".join(parts) + _RESULT_PART.format(counted=counted)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        event_id, event.version, entry_id, moved = cursor.fetchone()
    _saved(event, event_id)
    _saved(entry, entry_id)
    return entry, moved


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
