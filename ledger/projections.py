"""Replaying the log into fresh projections, to diff against the live tables.

Each app registers a Projection (from its AppConfig.ready) for the tables it derives from events,
so the ledger can verify every projection without importing any app.
"""

from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from ledger.models import Event


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


# A pass over the log reads this many events per fetch (a server-side cursor on PostgreSQL).
READ_CHUNK = 5000


def logged_events(
    *, with_seals: bool = False
) -> Iterator[tuple[LoggedEvent, int | None, str | None]]:
    """Every event once, in id order: (event, its seal's seq, its seal's hash), the seal's two
    None when it has none or `with_seals` is False. Plain values, read in chunks: flat memory."""
    seal = ("seal__seq", "seal__hash") if with_seals else ()
    rows = (
        Event.objects.order_by("id")
        .values_list(*LoggedEvent._fields, *seal)
        .iterator(chunk_size=READ_CHUNK)
    )
    width = len(LoggedEvent._fields)
    if not with_seals:
        for row in rows:
            yield LoggedEvent._make(row), None, None
        return
    for row in rows:
        yield LoggedEvent._make(row[:width]), row[width], row[width + 1]


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
