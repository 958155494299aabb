"""Compare-and-set on node rows, returning the stream version the change took.

Django's update() cannot return values, and a transition must know the version its event takes
without a second query, so these are UPDATE … RETURNING statements. Column names come from
the model, never from input.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from core.sql import statement
from ledger.errors import VersionConflict
from ledger.services import NewEvent, event_prepared, events_append_bulk
from nodes.hooks import claims_end_on_commit
from nodes.models import CLAIMABLE_STATES, Node


def _column(name: str) -> str:
    return connection.ops.quote_name(Node._meta.get_field(name).column)


def _prepared(name: str, value: Any) -> Any:
    return Node._meta.get_field(name).get_db_prep_save(value, connection)


def cas_update(
    *, node_id: int, expect_state: str | None, sets: dict[str, Any], events: int
) -> int | None:
    """Apply `sets` to the node if it is still in `expect_state`, bumping its stream version by
    `events`. Returns the new version, or None when the row was not (or no longer) in that
    state: someone else moved it first. A move to a state that takes no work ends the node's
    waiting claims once the caller commits."""
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
    if row is None:
        return None
    if "state" in sets and sets["state"] not in CLAIMABLE_STATES:
        claims_end_on_commit([node_id])
    return row[0]


# The reaper's passes, by (deadline, unless_past): nodes/sql/reap_*.sql.
_PASSES = {
    ("offline_after", None): "reap_offline",
    ("degraded_after", "offline_after"): "reap_degraded",
}


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

    One statement (nodes/sql/reap_offline.sql or reap_degraded.sql, which say what they lock)
    moves the due nodes, bumps each one's `event_version` and appends its NodeStateChanged at
    that version through the ledger's door (`ledger_append`, called by the statement: a batch's
    10,000 events never travel through Python), with the payload {"from": <the state it was
    locked in>, "to": to_state, "reason": reason}. Runs in the caller's transaction. Returns the
    ids of the nodes that moved; a move to a state that takes no work ends their waiting claims
    once the caller commits.
    """
    name = _PASSES.get((deadline, unless_past))
    if name is None:
        raise ValueError(f"no reaper pass for {deadline} unless past {unless_past}")
    prepared = [
        event_prepared("NodeStateChanged", {"from": s, "to": to_state, "reason": reason})
        for s in from_states
    ]
    params = {
        "live": list(from_states),
        "now": _prepared("state_changed_at", now),
        "limit": limit,
        "to": to_state,
        "type": "NodeStateChanged",
        "schema_version": prepared[0][0],
        "payloads": [payload for _, payload in prepared],
        "actor": actor,
    }
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement("nodes", name), params)
            moved = [row[0] for row in cursor.fetchall()]
    except IntegrityError:
        transaction.set_rollback(True)
        raise VersionConflict("a node stream moved while its transition was written") from None
    if to_state not in CLAIMABLE_STATES:
        claims_end_on_commit(moved)
    return moved


def append_node_events(
    *, node_id: int, version: int, events: Sequence[tuple[str, dict[str, Any]]], actor: str
) -> None:
    """Append `events` to node:<id>, the last one at `version` (what cas_update returned)."""
    before = version - len(events)  # the stream's version before the first of them
    events_append_bulk(
        [
            NewEvent(f"node:{node_id}", type_, payload, actor, before + i)
            for i, (type_, payload) in enumerate(events)
        ]
    )
