"""Events written by the statement that makes the change they record (PostgreSQL only).

A hot-path write that is one data-modifying statement (the claim: lock the task, insert the
attempt, move the task, record it) cannot call `event_append` between its parts: some payload
values (the new attempt's id) exist only inside the statement. `EventSql` builds the
`SELECT` list of an `INSERT INTO ledger_event … SELECT` whose payload and fingerprint
PostgreSQL assembles from the canonical JSON that Python made once, with the statement's own
integers spliced in. The stored row is exactly what `event_append` would store: the payload is
validated here (with stand-in integers, as the schema sees only their type), the fingerprint is
the sha256 of the same canonical bytes `_fingerprint` hashes.
"""

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger import registry
from ledger.canonical import canonical_json
from ledger.models import Event

_LITERAL = re.compile(r"[A-Za-z][A-Za-z0-9_:.-]*")

# Stand-ins for the statement's integers while Python serialises the payload: far above any id,
# so their digits cannot occur in the rest of the JSON by accident.
_STAND_IN = 7_318_000_000_000_000_000

COLUMNS = (
    "stream, type, schema_version, payload, actor, idempotency_key, fingerprint, recorded_at, "
    "version"
)
TABLE = Event._meta.db_table


@dataclass(frozen=True)
class SqlInt:
    """A payload value the statement supplies: an integer SQL expression (`att.id`)."""

    expr: str


@dataclass(frozen=True)
class EventSql:
    """The select list of one event, and its named parameters (prefixed by `name`)."""

    select: str
    params: dict[str, Any]


def event_sql(
    *,
    name: str,
    type: str,
    stream_prefix: str,
    stream_id: str,
    version: str,
    payload: dict[str, Any],
    actor: str,
    recorded_at: datetime | str,
) -> EventSql:
    """The columns (in COLUMNS order) of an event on stream `<stream_prefix><stream_id>` at
    `version`, where `stream_id` and `version` are integer SQL expressions and `payload`'s
    `SqlInt` values are filled in by the statement. `recorded_at` is a value, or the SQL of a
    parameter the statement already has (`%(now)s`).

    The type, the stream prefix and the schema version are written into the SQL as literals
    (they are the code's own names, checked below), the rest are parameters: psycopg caches
    its conversion of a statement only up to 50 parameters, and the claim is near that."""
    for literal in (type, stream_prefix):
        if not _LITERAL.fullmatch(literal):
            raise ValueError(f"{literal!r} cannot be written into SQL as a literal")
    exprs: dict[str, str] = {}
    sample: dict[str, Any] = {}
    for key, value in payload.items():
        if isinstance(value, SqlInt):
            stand_in = _STAND_IN + len(exprs)
            exprs[str(stand_in)] = value.expr
            sample[key] = stand_in
        else:
            sample[key] = value
    event_type = registry.validate(type, sample)
    text = canonical_json(sample).decode()
    params: dict[str, Any] = {}
    parts = []
    pieces = re.split("(" + "|".join(exprs) + ")", text) if exprs else [text]
    for i, piece in enumerate(pieces):
        if piece in exprs:
            parts.append(f"({exprs[piece]})::text")
        elif piece:
            params[f"{name}_p{i}"] = piece
            parts.append(f"%({name}_p{i})s::text")
    payload_text = " || ".join(parts)
    stream_text = f"'{stream_prefix}' || ({stream_id})::text"
    # canonical_json({"payload": …, "stream": …, "type": …}): sorted keys, no spaces.
    hashed = (
        f'\'{{"payload":\' || {payload_text} || \',"stream":"\' || {stream_text} || '
        f'\'","type":"{type}"}}\''
    )
    params[f"{name}_actor"] = actor
    if isinstance(recorded_at, str):
        at = recorded_at
    else:
        at = f"%({name}_at)s"
        params[f"{name}_at"] = recorded_at
    select = (
        f"{stream_text}, '{type}', {int(event_type.schema_version)}, ({payload_text})::jsonb, "
        f"%({name}_actor)s, NULL, encode(sha256(convert_to({hashed}, 'UTF8')), 'hex'), "
        f"{at}, {version}"
    )
    return EventSql(select, params)
