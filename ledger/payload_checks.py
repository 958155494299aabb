"""verify_ledger's check that every event's payload agrees with itself.

A replay rebuilds balances from each payload's postings alone, so an `amount_minor` edited
beside untouched postings (or postings edited beside the stated amounts) would replay cleanly.
Here each payload is validated against its type's schema again, its postings must balance per
currency, and its type's own `check` (declared where the type is registered) compares the
figures it states with what its postings move. Each problem names the event.
"""

from collections import defaultdict
from typing import Any

from ledger import registry
from ledger.errors import InvalidEvent
from ledger.projections import LoggedEvent


def moves(payload: dict[str, Any]) -> dict[str, int]:
    """What the postings move, net, per account code (accounts they leave unchanged omitted)."""
    moved: dict[str, int] = defaultdict(int)
    for code, amount, _currency in payload.get("postings") or ():
        moved[code] += amount
    return {code: amount for code, amount in moved.items() if amount}


def moves_differ(payload: dict[str, Any], stated: dict[str, int]) -> list[str]:
    """[] when the postings move exactly `stated` (zero amounts: no posting), else why not."""
    stated = {code: amount for code, amount in stated.items() if amount}
    moved = moves(payload)
    if moved == stated:
        return []
    return [f"its postings move {_listed(moved)}, its figures say {_listed(stated)}"]


def sum_differs(payload: dict[str, Any], total: str, *parts: str) -> list[str]:
    """[] when payload[total] is the sum of the `parts`, else the figures that disagree."""
    if payload[total] == sum(payload[part] for part in parts):
        return []
    terms = " + ".join(f"{part} {payload[part]}" for part in parts)
    return [f"{total} {payload[total]} is not {terms}"]


def _listed(moved: dict[str, int]) -> str:
    return ", ".join(f"{code} {amount:+d}" for code, amount in sorted(moved.items())) or "nothing"


def _unbalanced(payload: dict[str, Any]) -> list[str]:
    totals: dict[str, int] = {}
    for _code, amount, currency in payload.get("postings") or ():
        totals[currency] = totals.get(currency, 0) + amount
    if not any(totals.values()):
        return []  # balanced, as nearly every payload is: no list of phrases to build
    return [
        f"its postings sum to {total:+d} {currency}, not zero"
        for currency, total in sorted(totals.items())
        if total
    ]


class PayloadCheck:
    """Fed every event once (verify_ledger's pass); `problems` lists what disagrees."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._types = registry.all_types()

    def apply(self, event: LoggedEvent) -> None:
        event_type = self._types.get(event.type)
        if event_type is None:
            self.problems.append(f"{_named(event)} is of no registered type")
            return
        if event_type.schema_version != event.schema_version:
            return  # written under another version of the schema: the current one says nothing
        try:
            registry.validate(event.type, event.payload)
        except InvalidEvent as exc:
            self.problems.append(f"{_named(event)}: {exc}")
            return
        found = _unbalanced(event.payload)
        if event_type.check is not None:
            found += event_type.check(event.payload)
        if found:
            where = _named(event)
            self.problems.extend(f"{where}: {phrase}" for phrase in found)


def _named(event: LoggedEvent) -> str:
    # Built only for a problem, not before the checks: the pass reads every event of the log,
    # and almost none has one.
    return f"payload: event {event.id} ({event.stream}@{event.version} {event.type})"
