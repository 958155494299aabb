"""verify_ledger: the chain and its signatures, every payload, the books and every registered
projection, against the log; optionally against exports' signed heads."""

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from ledger.against import against_check
from ledger.chain import ChainCheck
from ledger.payload_checks import PayloadCheck
from ledger.projections import logged_events, projections


@dataclass
class VerifyReport:
    events: int = 0
    problems: list[str] = field(default_factory=list)
    # Worth saying but not a difference: seals from before they were signed.
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_ledger(
    *,
    check_chain: bool = True,
    progress: Callable[[int], None] | None = None,
    against: Iterable[tuple[str, Any]] = (),
) -> VerifyReport:
    """One pass over the log in id order, as plain values: each event is folded into the chain
    check (with its seal), the payload check and every projection; then the chain's problems,
    the payloads', each projection's diff against the live tables, and each export head in
    `against` ((name, parsed head file) pairs) checked against the log.

    On a live hub, the log and the tables move while this reads them: a node the reaper moves
    between the replay and the diff would read as a difference. So, unless the caller is in a
    transaction already, everything is read from one snapshot (REPEATABLE READ)."""
    if connection.in_atomic_block:
        return _verify(check_chain, progress, against)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return _verify(check_chain, progress, against)


def _verify(
    check_chain: bool,
    progress: Callable[[int], None] | None,
    against: Iterable[tuple[str, Any]],
) -> VerifyReport:
    report = VerifyReport()
    chain = ChainCheck() if check_chain else None
    payloads = PayloadCheck()
    active = projections()
    for projection in active:
        projection.reset()
    for event, seq, stored in logged_events(with_seals=check_chain):
        if chain is not None:
            chain.apply(event, seq, stored)
        payloads.apply(event)
        for projection in active:
            projection.apply(event)
        report.events += 1
        if progress is not None and report.events % 100_000 == 0:
            progress(report.events)
    if chain is not None:
        report.problems.extend(chain.finish())
        report.notes.extend(chain.notes)
    report.problems.extend(payloads.problems)
    for projection in active:
        report.problems.extend(projection.diff())
    for name, data in against:
        report.problems.extend(against_check(data, name))
    return report


def print_progress(count: int) -> None:
    print(f"  … {count} events replayed", file=sys.stderr)
