"""Tamper evidence: events sealed into a hash chain, and the check that recomputes it.

Why a horizon and not "every id above the last sealed one": ids are handed out when a row is
inserted, not when its transaction commits. A transaction that took id 10 and commits after the
one that took id 11 would be skipped by a sealer that already passed 11. On PostgreSQL every event
records its transaction id (a trigger sets it), and a pass seals only events whose transaction is
older than the oldest one still open in this database: that set can no longer grow, so nothing is
ever skipped. A pass takes the events between the previous pass's horizon and its own, in id
order.
"""

import bisect
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from core.sql import statement
from ledger.canonical import canonical_json, sha256_hex
from ledger.models import Event, EventSeal, SealBatch
from ledger.projections import LoggedEvent, logged_events

GENESIS = "0" * 64
# pg_advisory_xact_lock key: one sealer at a time, so a double-fired beat seals nothing twice.
_SEAL_LOCK_KEY = 0x5EA1


def event_digest(event: Event | LoggedEvent) -> bytes:
    """Every column that carries meaning, in a fixed form."""
    return canonical_json(
        [
            event.id,
            event.stream,
            event.version,
            event.type,
            event.schema_version,
            event.payload,
            event.actor,
            event.idempotency_key,
            event.recorded_at.isoformat(),
        ]
    )


def link_hash(previous: str, event: Event | LoggedEvent) -> str:
    return sha256_hex(previous.encode() + b"\n" + event_digest(event))


def _horizon(previous: int, limit: int) -> int:
    """The exclusive txid bound of this pass: below every open transaction, ~`limit` events."""
    with connection.cursor() as cursor:
        cursor.execute(statement("ledger", "oldest_open_txid"))
        oldest_open = max(cursor.fetchone()[0], previous)
    # The txid of the event `limit` places on: the pass stops before its transaction.
    bound = list(
        Event.objects.filter(txid__gte=previous, txid__lt=oldest_open)
        .order_by("txid")
        .values_list("txid", flat=True)[limit : limit + 1]
    )
    if not bound:
        return oldest_open
    # Whole transactions only: a pass never splits one transaction's events.
    return bound[0] if bound[0] > previous else bound[0] + 1


@dataclass(frozen=True)
class SealResult:
    sealed: int
    head: str
    batch_id: int | None


def chain_seal(*, limit: int = 5000) -> SealResult:
    """Seal the next events into the chain. Idempotent: with nothing new it writes nothing."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SEAL_LOCK_KEY])
        last = SealBatch.objects.order_by("-id").first()
        head = last.head_hash if last else GENESIS
        seq = (last.last_seq or 0) if last else 0
        previous = (last.horizon_txid or 0) if last else 0
        horizon = _horizon(previous, limit)
        events = list(Event.objects.filter(txid__gte=previous, txid__lt=horizon).order_by("id"))
        if not events:
            return SealResult(0, head, None)
        seals = []
        for event in events:
            seq += 1
            head = link_hash(head, event)
            seals.append((seq, event, head))
        batch = SealBatch.objects.create(
            first_seq=seals[0][0],
            last_seq=seq,
            count=len(seals),
            head_hash=head,
            sealed_at=timezone.now(),
            horizon_txid=horizon,
        )
        EventSeal.objects.bulk_create(
            EventSeal(seq=s, event=e, batch=batch, hash=h) for s, e, h in seals
        )
        return SealResult(len(seals), head, batch.id)


def chain_head() -> str:
    last = SealBatch.objects.order_by("-id").first()
    return last.head_hash if last else GENESIS


class ChainCheck:
    """The chain recomputed while the log is read once in id order (ledger.projections
    .logged_events(with_seals=True)), beside the projections' replay: `apply` each event with
    its seal, then `finish` for the problems, one line each, in seal order.

    Each seal's hash must be sha256(the previous seal's stored hash || its event). Seals follow
    ids except where a late commit was sealed in a later pass: a seal whose predecessor has not
    been read yet waits for it (a handful, so memory stays flat). A gap in the seqs is a missing
    seal; the seal after it is checked against the last seal before it, as a reader walking the
    chain would. The check goes on from each stored hash, so one rewritten event is reported
    once, not cascaded.
    """

    _UNSEALED_SHOWN = 20

    def __init__(self) -> None:
        self.last = SealBatch.objects.order_by("-id").first()
        self.found: list[tuple[int, int, str]] = []  # (seq, 0 missing | 1 mismatch, line)
        self.unclaimed: dict[int, str] = {}  # seq → its stored hash, until seq + 1 uses it
        self.waiting: dict[int, tuple[str, LoggedEvent]] = {}  # seq → (hash, event) for seq - 1
        self.last_seq = 0
        self.unsealed: list[int] = []

    def _below_horizon(self, event: LoggedEvent) -> bool:
        if self.last is None:
            return False
        return event.txid is not None and event.txid < (self.last.horizon_txid or 0)

    def _check(self, seq: int, previous: str, stored: str, event: LoggedEvent) -> None:
        if link_hash(previous, event) != stored:
            self.found.append(
                (
                    seq,
                    1,
                    f"chain: event {event.id} ({event.stream}@{event.version} {event.type}) "
                    f"does not match seal #{seq}: it was changed after it was sealed",
                )
            )

    def apply(self, event: LoggedEvent, seq: int | None, stored: str | None) -> None:
        if seq is None or stored is None:
            if len(self.unsealed) < self._UNSEALED_SHOWN and self._below_horizon(event):
                self.unsealed.append(event.id)
            return
        self.last_seq = max(self.last_seq, seq)
        previous = GENESIS if seq == 1 else self.unclaimed.pop(seq - 1, None)
        if previous is None:
            self.waiting[seq] = (stored, event)
        else:
            self._check(seq, previous, stored, event)
        follower = self.waiting.pop(seq + 1, None)
        if follower is None:
            self.unclaimed[seq] = stored
        else:
            self._check(seq + 1, stored, *follower)

    def finish(self) -> list[str]:
        # What still waits comes after a gap: check it against the last seal before the gap.
        before = sorted(self.unclaimed)
        for seq in sorted(self.waiting):
            stored, event = self.waiting[seq]
            at = bisect.bisect_left(before, seq)
            gap_from = before[at - 1] + 1 if at else 1
            self.found.append((seq, 0, f"chain: seal #{gap_from} is missing (next is #{seq})"))
            self._check(seq, self.unclaimed[before[at - 1]] if at else GENESIS, stored, event)
        problems = [line for _, _, line in sorted(self.found)]
        if self.last is None:
            return problems
        # The last seal's hash: no seal follows it, so it is never claimed.
        head = self.unclaimed.get(self.last_seq, GENESIS)
        if self.last.head_hash != head:
            problems.append(
                f"chain: head {self.last.head_hash[:16]} of batch {self.last.id} is not the last "
                f"seal's hash {head[:16]}"
            )
        problems.extend(
            f"chain: event {event_id} is below the sealed horizon but not sealed"
            for event_id in self.unsealed
        )
        return problems


def chain_verify() -> list[str]:
    """Recompute the chain from the events; every difference is one line of the answer."""
    check = ChainCheck()
    for event, seq, stored in logged_events(with_seals=True):
        check.apply(event, seq, stored)
    return check.finish()
