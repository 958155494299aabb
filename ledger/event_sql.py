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
# What stands in for a value of the call while the shape is worked out (never validated).
_VALUE_PROBE = _STAND_IN - 1
# A piece of canonical JSON that holds only keys and punctuation: safe as an SQL literal as it
# is (no quote, no backslash, no `%` that psycopg would read as a placeholder).
_KEYS_ONLY = re.compile(r'[A-Za-z0-9_",:{}\[\]-]*')

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


@dataclass(frozen=True)
class _Shape:
    """What a payload's shape fixes: the select list, and which pieces of the canonical JSON
    between the statement's integers hold values (parameters; the rest are literals)."""

    select: str
    stand_ins: dict[str, int]  # payload key: the integer standing in for its SQL expression
    split: re.Pattern | None
    pieces: int  # how many the split gives, stand-ins included
    params: tuple[tuple[int, str], ...]  # (piece index, parameter name) of the valued pieces


# One per shape and process: the claim builds its events on every call, and building the select
# list, with a parameter per piece, was most of what the claim spent in Python (§7).
_shapes: dict[tuple, _Shape] = {}


def _shape_key(name: str, type: str, stream_prefix: str, stream_id: str, version: str,
               payload: dict[str, Any], recorded_at: datetime | str) -> tuple:  # fmt: skip
    fields = tuple(
        sorted((k, v.expr if isinstance(v, SqlInt) else None) for k, v in payload.items())
    )
    at = recorded_at if isinstance(recorded_at, str) else None
    return (name, type, stream_prefix, stream_id, version, at, fields)


def _sql_literal(piece: str) -> str | None:
    """A piece of keys and punctuation as an SQL string literal, or None if it holds anything
    else (it is then a parameter)."""
    return f"'{piece}'" if _KEYS_ONLY.fullmatch(piece) else None


def _build_shape(key: tuple, payload: dict[str, Any], type: str, actor_param: str) -> _Shape:
    name, _, stream_prefix, stream_id, version, at, _ = key
    stand_ins: dict[str, int] = {}
    exprs: dict[str, str] = {}
    probe: dict[str, Any] = {}
    for key_name, value in payload.items():
        if isinstance(value, SqlInt):
            stand_ins[key_name] = _STAND_IN + len(exprs)
            exprs[str(stand_ins[key_name])] = value.expr
            probe[key_name] = stand_ins[key_name]
        else:  # a value of this call: which piece it lands in is all the shape needs
            probe[key_name] = _VALUE_PROBE
    split = re.compile("(" + "|".join(exprs) + ")") if exprs else None
    text = canonical_json(probe).decode()
    pieces = split.split(text) if split else [text]
    parts, params = [], []
    for i, piece in enumerate(pieces):
        if piece in exprs:
            parts.append(f"({exprs[piece]})::text")
        elif piece:
            literal = None if str(_VALUE_PROBE) in piece else _sql_literal(piece)
            if literal is None:
                params.append((i, f"{name}_p{i}"))
                parts.append(f"%({name}_p{i})s::text")
            else:
                parts.append(f"{literal}::text")
    payload_text = " || ".join(parts)
    stream_text = f"'{stream_prefix}' || ({stream_id})::text"
    # canonical_json({"payload": …, "stream": …, "type": …}): sorted keys, no spaces.
    hashed = (
        f'\'{{"payload":\' || {payload_text} || \',"stream":"\' || {stream_text} || '
        f'\'","type":"{type}"}}\''
    )
    select = (
        f"{stream_text}, '{type}', {int(registry.get(type).schema_version)}, "
        f"({payload_text})::jsonb, %({actor_param})s, NULL, "
        f"encode(sha256(convert_to({hashed}, 'UTF8')), 'hex'), "
        f"{at if at is not None else f'%({name}_at)s'}, {version}"
    )
    return _Shape(select, stand_ins, split, len(pieces), tuple(params))


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

    The type, the stream prefix, the schema version and the payload's keys are written into
    the SQL as literals (they are the code's own names, checked below), the payload's values and
    the actor are parameters: psycopg caches its conversion of a statement only up to 50
    parameters, and converts each parameter anew on every call. The select list depends only on
    the payload's shape (its keys, and which of them the statement supplies), so it is built
    once per shape."""
    for literal in (type, stream_prefix):
        if not _LITERAL.fullmatch(literal):
            raise ValueError(f"{literal!r} cannot be written into SQL as a literal")
    key = _shape_key(name, type, stream_prefix, stream_id, version, payload, recorded_at)
    shape = _shapes.get(key)
    if shape is None:
        shape = _shapes[key] = _build_shape(key, payload, type, f"{name}_actor")
    sample = {k: shape.stand_ins.get(k, v) for k, v in payload.items()}
    registry.validate(type, sample)
    text = canonical_json(sample).decode()
    pieces = shape.split.split(text) if shape.split else [text]
    if len(pieces) != shape.pieces:  # a value's own text held a stand-in's digits
        raise ValueError(f"a {type} payload value cannot be told from the statement's integers")
    params: dict[str, Any] = {param: pieces[i] for i, param in shape.params}
    params[f"{name}_actor"] = actor
    if not isinstance(recorded_at, str):
        params[f"{name}_at"] = recorded_at
    return EventSql(shape.select, params)
