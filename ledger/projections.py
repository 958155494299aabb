"""Replaying the log into fresh projections, to diff against the live tables.

Each app registers a Projection (from its AppConfig.ready) for the tables it derives from events,
so the ledger can verify every projection without importing any app.
"""

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import psycopg
from django.db import connection
from psycopg.pq import Format

from core.sql import statement


class LoggedEvent(NamedTuple):
    """An event as verify_ledger reads it: the columns of ledger.models.Event, as attributes of
    the same names, without a model instance per row."""

    id: int
    stream: str
    version: int
    type: str
    schema_version: int
    payload: Any
    actor: str
    idempotency_key: str | None
    recorded_at: datetime
    txid: int | None

    @property
    def pk(self) -> int:
        return self.id


# A pass over the log reads this many events per fetch (a server-side cursor).
READ_CHUNK = 5000

# psycopg's own loader for a timestamp (its compiled one, where it has it), for the pass below.
_TIMESTAMPTZ = psycopg.adapters.types["timestamptz"].oid
_TIMESTAMP_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ, Format.TEXT)


def logged_events(
    *, with_seals: bool = False
) -> Iterator[tuple[LoggedEvent, int | None, str | None]]:
    """Every event once, in id order: (event, its seal's seq, its seal's hash), the seal's two
    None when it has none or `with_seals` is False. Plain values, read in chunks: flat memory.

    A pass reads every event of the log, and through the ORM reading one cost more than all the
    checks the pass then runs on it: a converter per column, and a timestamp parsed in Python by
    the loader Django puts on its connections. So the rows come from a plain cursor, with
    psycopg's own loader for the timestamp, and the payload (which Django's connections read as
    text) is parsed here, as the model field would. The values are the same: an aware datetime
    in the session's zone (UTC), the payload as json.loads gives it."""
    with connection.chunked_cursor() as cursor:
        cursor.cursor.adapters.register_loader(_TIMESTAMPTZ, _TIMESTAMP_LOADER)
        cursor.execute(statement("ledger", "logged_events"), {"with_seals": with_seals})
        while rows := cursor.fetchmany(READ_CHUNK):
            for *head, payload, actor, key, recorded_at, txid, seq, stored in rows:
                event = LoggedEvent(*head, json.loads(payload), actor, key, recorded_at, txid)
                yield event, seq, stored


class Projection(Protocol):
    name: str

    def reset(self) -> None:
        """Forget any replayed state (verify can run twice in one process)."""

    def apply(self, event: LoggedEvent) -> None:
        """Fold one event, in id order, into the fresh projection."""

    def diff(self) -> list[str]:
        """Compare the replayed projection with the live tables; one line per difference."""


_PROJECTIONS: dict[str, Projection] = {}


def register_projection(projection: Projection) -> None:
    _PROJECTIONS[projection.name] = projection


def projections() -> list[Projection]:
    return list(_PROJECTIONS.values())
