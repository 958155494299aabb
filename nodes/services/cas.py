"""Compare-and-set on node rows, returning the stream version the change took.

Django's update() cannot return values, and a transition must know the version its event takes
without a second query, so these are UPDATE … RETURNING statements. Column names come from
the model, never from input.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from ledger.errors import VersionConflict
from ledger.services import NewEvent, events_append_bulk, events_insert_sql
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
    their events, in one statement, for at most `limit` nodes.
    Nodes also past the `unless_past` deadline are left alone (the degraded pass leaves a node
    that is due to go offline to the offline pass, even one that pass skipped as locked).

    Picks and locks the due rows (`FOR UPDATE SKIP LOCKED`: a row another transaction holds — a
    heartbeat, a second reaper — is left to it; a row changed since the statement began is read
    again and must still be due), moves them, bumps each one's `event_version`, and appends its
    NodeStateChanged event at that version with the payload {"from": <the state it was locked
    in>, "to": to_state, "reason": reason}; nothing of it passes through Python. The UPDATE finds
    its rows by primary key (`= ANY(ARRAY(…))`), not by joining the table: a join would scan the
    whole table once per batch. Returns the ids of the nodes that moved.
    """
    table = connection.ops.quote_name(Node._meta.db_table)
    id_, state, version = _column("id"), _column("state"), _column("event_version")
    insert, insert_params = events_insert_sql(
        source="moved_from",
        type="NodeStateChanged",
        payloads={s: {"from": s, "to": to_state, "reason": reason} for s in from_states},
        stream_prefix="node:",
        actor=actor,
    )
    stamp = _prepared("state_changed_at", now)
    live = ", ".join(["%s"] * len(from_states))
    spare = f"AND {_column(unless_past)} >= %s " if unless_past else ""
    sql = (
        f"WITH due AS (SELECT {id_} AS id, {state} AS state FROM {table} "  # noqa: S608
        f"WHERE {state} IN ({live}) AND {_column(deadline)} < %s {spare}"
        "LIMIT %s FOR UPDATE SKIP LOCKED), "
        f"moved AS (UPDATE {table} SET {state} = %s, "
        f"{_column('state_changed_at')} = %s, {version} = {version} + 1 "
        f"WHERE {id_} = ANY(ARRAY(SELECT id FROM due)) AND {state} IN ({live}) "
        f"RETURNING {id_} AS id, {version} AS version), "
        "moved_from AS (SELECT moved.id, moved.version, due.state AS key "
        "FROM moved JOIN due ON due.id = moved.id), "
        f"appended AS ({insert}) "
        "SELECT id FROM moved"
    )
    params = [*from_states, stamp, *([stamp] if unless_past else []), limit, to_state, stamp,
              *from_states, *insert_params]  # fmt: skip
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]
    except IntegrityError:
        transaction.set_rollback(True)
        raise VersionConflict("a node stream moved while its transition was written") from None


def append_node_events(
    *, node_id: int, version: int, events: Sequence[tuple[str, dict[str, Any]]], actor: str
) -> None:
    """Append `events` to node:<id>, the last one at `version` (what cas_update returned)."""
    first = version - len(events) + 1
    events_append_bulk(
        [
            NewEvent(
                stream=f"node:{node_id}",
                version=first + i,
                type=type_,
                payload=payload,
                actor=actor,
            )
            for i, (type_, payload) in enumerate(events)
        ]
    )
