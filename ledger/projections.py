"""Replaying the log into fresh projections, to diff against the live tables.

Each app registers a Projection (from its AppConfig.ready) for the tables it derives from events,
so the ledger can verify every projection without importing any app.
"""

from typing import Protocol

from ledger.models import Event


class Projection(Protocol):
    name: str

    def reset(self) -> None:
        """Forget any replayed state (verify can run twice in one process)."""

    def apply(self, event: Event) -> None:
        """Fold one event, in id order, into the fresh projection."""

    def diff(self) -> list[str]:
        """Compare the replayed projection with the live tables; one line per difference."""


_PROJECTIONS: dict[str, Projection] = {}


def register_projection(projection: Projection) -> None:
    _PROJECTIONS[projection.name] = projection


def projections() -> list[Projection]:
    return list(_PROJECTIONS.values())
