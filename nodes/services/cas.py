"""Compare-and-set on node rows, returning the stream version the change took.

Django's update() cannot return values, and a transition must know the version its event takes
without a second query, so these are UPDATE … RETURNING statements. Column names come from
the model, never from input.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from ledger.services import NewEvent, events_append_bulk
from nodes.models import Node


def _column(name: str) -> str:
    return connection.ops.quote_name(Node._meta.get_field(name).column)


def _prepared(name: str, value: Any) -> Any:
    return Node._meta.get_field(name).get_db_prep_save(value, connection)


def cas_update(
    *, node_id: int, expect_state: str | None, sets: dict[str, Any], events: int
) -> int | None:
    """Apply `sets` to the node if it is still in `expect_state`, bumping its stream version by
    `events`. Returns the new version, or None when the row was not (or no longer) in that
    state: someone else moved it first."""
    assignments = [f"{_column(name)} = %s" for name in sets]
    params = [_prepared(name, value) for name, value in sets.items()]
    version = _column("event_version")
    assignments.append(f"{version} = {version} + %s")
    params.append(events)
    where = f"{_column('id')} = %s"
    params.append(node_id)
    if expect_state is not None:
        where += f" AND {_column('state')} = %s"
        params.append(expect_state)
    sql = (
        f"UPDATE {connection.ops.quote_name(Node._meta.db_table)} "  # noqa: S608 - model names
        f"SET {', '.join(assignments)} WHERE {where} RETURNING {version}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row[0] if row else None


# Moves the due nodes and returns, for each, its id, the version its event takes and the state
# it was locked in (filled in by `_TRANSITION` below).
_TRANSITION = """
WITH due AS (
    SELECT {id} AS id, {state} AS state FROM {table}
     WHERE {state} = ANY(%(live)s::varchar[]) AND {deadline} < %(now)s {spare}
     LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {table} SET {state} = %(to)s, {changed} = %(now)s, {version} = {version} + 1
     WHERE {id} = ANY(ARRAY(SELECT id FROM due)) AND {state} = ANY(%(live)s::varchar[])
    RETURNING {id} AS id, {version} AS version
)
SELECT moved.id, moved.version, due.state FROM moved JOIN due ON due.id = moved.id
ORDER BY moved.id
"""


def transition_due_logged(
    *,
    from_states: Sequence[str],
    to_state: str,
    deadline: str,
    now: datetime,
    reason: str,
    actor: str,
    limit: int,
    unless_past: str | None = None,
) -> list[int]:
    """Move the nodes in `from_states` whose `deadline` column has passed to `to_state`, with
    their events, for at most `limit` nodes.
    Nodes also past the `unless_past` deadline are left alone (the degraded pass leaves a node
    that is due to go offline to the offline pass, even one that pass skipped as locked).

    One statement picks and locks the due rows (`FOR UPDATE SKIP LOCKED`: a row another
    transaction holds — a heartbeat, a second reaper — is left to it; a row changed since the
    statement began is read again and must still be due), moves them and bumps each one's
    `event_version`; then one `events_append_bulk` call appends each node's NodeStateChanged
    at that version, with the payload {"from": <the state it was locked in>, "to": to_state,
    "reason": reason}. The UPDATE finds its rows by primary key (`= ANY(ARRAY(…))`), not by
    joining the table: a join would scan the whole table once per batch. Runs in the caller's
    transaction. Returns the ids of the nodes that moved.
    """
    sql = _TRANSITION.format(
        table=connection.ops.quote_name(Node._meta.db_table),
        id=_column("id"),
        state=_column("state"),
        version=_column("event_version"),
        changed=_column("state_changed_at"),
        deadline=_column(deadline),
        spare=f"AND {_column(unless_past)} >= %(now)s" if unless_past else "",
    )
    stamp = _prepared("state_changed_at", now)
    params = {"live": list(from_states), "now": stamp, "limit": limit, "to": to_state}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        moved = cursor.fetchall()
    payloads = {s: {"from": s, "to": to_state, "reason": reason} for s in from_states}
    events_append_bulk(
        [
            NewEvent(f"node:{node_id}", "NodeStateChanged", payloads[state], actor, version - 1)
            for node_id, version, state in moved
        ],
        recorded_at=now,
    )
    return [row[0] for row in moved]


def append_node_events(
    *, node_id: int, version: int, events: Sequence[tuple[str, dict[str, Any]]], actor: str
) -> None:
    """Append `events` to node:<id>, the last one at `version` (what cas_update returned)."""
    expected = version - len(events)
    events_append_bulk(
        [NewEvent(f"node:{node_id}", type_, payload, actor, expected) for type_, payload in events]
    )
