"""verify_ledger: the chain, the books and every registered projection, against the log."""

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.chain import chain_verify
from ledger.models import Event
from ledger.projections import projections


@dataclass
class VerifyReport:
    events: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_ledger(
    *, check_chain: bool = True, progress: Callable[[int], None] | None = None
) -> VerifyReport:
    report = VerifyReport()
    if check_chain:
        report.problems.extend(chain_verify())
    active = projections()
    for projection in active:
        projection.reset()
    for event in Event.objects.order_by("id").iterator(chunk_size=5000):
        for projection in active:
            projection.apply(event)
        report.events += 1
        if progress is not None and report.events % 100_000 == 0:
            progress(report.events)
    for projection in active:
        report.problems.extend(projection.diff())
    return report


def print_progress(count: int) -> None:
    print(f"  … {count} events replayed", file=sys.stderr)
