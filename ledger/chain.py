"""Tamper evidence: events sealed into a hash chain, and the check that recomputes it.

Why a horizon and not "every id above the last sealed one": ids are handed out when a row is
inserted, not when its transaction commits. A transaction that took id 10 and commits after the
one that took id 11 would be skipped by a sealer that already passed 11. On PostgreSQL every event
records its transaction id (a trigger sets it), and a pass seals only events whose transaction is
older than the oldest one still open in this database: that set can no longer grow, so nothing is
ever skipped. A pass takes the events between the previous pass's horizon and its own, in id
order.

Each pass signs its head with the ledger's key (ledger.seal_signing). A head commits to every
seal before it, so rewriting any sealed event means recomputing every later seal and head, and
no later batch's signature then verifies without the key.
"""

import bisect
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min, OuterRef, Subquery
from django.utils import timezone

from core.sql import statement
from ledger import seal_signing
from ledger.canonical import canonical_json, sha256_hex
from ledger.models import Event, EventSeal, SealBatch
from ledger.projections import LoggedEvent, logged_events
from ledger.seal_signing import SIGNED_FIELDS, SignedHead

GENESIS = "0" * 64
# pg_advisory_xact_lock key: one sealer at a time, so a double-fired beat seals nothing twice.
_SEAL_LOCK_KEY = 0x5EA1
# Batches whose signature fails named one by one; past that, counted.
_SHOWN = 20


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
        signed = SignedHead(
            first_seq=seals[0][0],
            last_seq=seq,
            count=len(seals),
            horizon_txid=horizon,
            head_hash=head,
            key_id=seal_signing.key_id(),
        )
        batch = SealBatch.objects.create(
            first_seq=signed.first_seq,
            last_seq=signed.last_seq,
            count=signed.count,
            head_hash=head,
            sealed_at=timezone.now(),
            horizon_txid=horizon,
            key_id=signed.key_id,
            signature=seal_signing.head_sign(signed),
        )
        EventSeal.objects.bulk_create(
            EventSeal(seq=s, event=e, batch=batch, hash=h) for s, e, h in seals
        )
        return SealResult(len(seals), head, batch.id)


def last_batch() -> SealBatch | None:
    return SealBatch.objects.order_by("-id").first()


def chain_head() -> str:
    last = last_batch()
    return last.head_hash if last else GENESIS


def signed_head(batch: SealBatch) -> SignedHead:
    """What the batch's signature is over."""
    return SignedHead(*(getattr(batch, name) for name in SIGNED_FIELDS))


class ChainCheck:
    """The chain recomputed while the log is read once in id order (ledger.projections
    .logged_events(with_seals=True)), beside the projections' replay: `apply` each event with
    its seal, then `finish` for the problems, one line each, in seal order.

    Each seal's hash must be sha256(the previous seal's stored hash || its event). Seals follow
    ids except where a late commit was sealed in a later pass: a seal whose predecessor has not
    been read yet waits for it (a handful, so memory stays flat). A gap in the seqs is a missing
    seal; the seal after it is checked against the last seal before it, as a reader walking the
    chain would. The check goes on from each stored hash, so one rewritten event is reported
    once, not cascaded. `finish` then checks each batch's head and signature (batches_check).
    """

    _UNSEALED_SHOWN = 20

    def __init__(self) -> None:
        self.last = SealBatch.objects.order_by("-id").first()
        self.found: list[tuple[int, int, str]] = []  # (seq, 0 missing | 1 mismatch, line)
        self.unclaimed: dict[int, str] = {}  # seq → its stored hash, until seq + 1 uses it
        self.waiting: dict[int, tuple[str, LoggedEvent]] = {}  # seq → (hash, event) for seq - 1
        self.unsealed: list[int] = []
        self.notes: list[str] = []  # what verify reports without failing (unsigned old seals)

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
        batches = batches_check()
        self.notes = batches.notes
        problems.extend(batches.problems)
        problems.extend(
            f"chain: event {event_id} is below the sealed horizon but not sealed"
            for event_id in self.unsealed
        )
        return problems


class _Batch(NamedTuple):
    id: int
    head: SignedHead
    signature: str
    seal_hash: str | None  # the stored hash of seal #last_seq


def _span(batches: list[_Batch]) -> str:
    ids = f"{batches[0].id}–{batches[-1].id}" if len(batches) > 1 else f"{batches[0].id}"
    return (
        f"seal batch{'es' if len(batches) > 1 else ''} {ids} "
        f"(seals #{batches[0].head.first_seq}–#{batches[-1].head.last_seq})"
    )


def _were(batches: list[_Batch]) -> str:
    return "were" if len(batches) > 1 else "was"


def _events_of(batch: _Batch) -> str:
    ids = EventSeal.objects.filter(batch_id=batch.id).aggregate(
        a=Min("event_id"), b=Max("event_id")
    )
    if ids["a"] is None:
        return "no event left"
    return f"event {ids['a']}" if ids["a"] == ids["b"] else f"events {ids['a']}–{ids['b']}"


@dataclass
class BatchesCheck:
    problems: list[str]
    notes: list[str]


def batches_check() -> BatchesCheck:
    """Every seal batch, in order: its head must be its last seal's stored hash and carry a
    trusted key's signature. The links between seals are ChainCheck's: with both, every seal up
    to a batch with a valid signature is as its sealer left it.

    Batches sealed before signing began (those starting below LEDGER_SIGNED_FROM_SEQ) carry no
    signature and are a note, not a problem: the first signed head after them covers them.
    """
    trusted = seal_signing.trusted_keys()
    last_hash = EventSeal.objects.filter(seq=OuterRef("last_seq")).values("hash")
    rows = (
        SealBatch.objects.order_by("id")
        .annotate(seal_hash=Subquery(last_hash))
        .values_list("id", *SIGNED_FIELDS, "signature", "seal_hash")
        .iterator(chunk_size=5000)
    )
    found = BatchesCheck([], [])
    unsigned: list[_Batch] = []  # a run of batches without a signature that should have one
    legacy: list[_Batch] = []  # a run sealed before signing
    failed = 0
    for row in rows:
        batch = _Batch(row[0], SignedHead(*row[1:-2]), *row[-2:])
        head = batch.head
        if batch.seal_hash != head.head_hash:
            found.problems.append(
                f"chain: head {head.head_hash[:16]} of batch {batch.id} is not seal "
                f"#{head.last_seq}'s hash {(batch.seal_hash or '(no such seal)')[:16]}"
            )
        if not batch.signature:
            before_signing = (head.first_seq or 0) < settings.LEDGER_SIGNED_FROM_SEQ
            (legacy if before_signing else unsigned).append(batch)
            continue
        if legacy:
            found.notes.append(
                f"chain: {_span(legacy)} {_were(legacy)} sealed before seals were signed; "
                f"the signed head of batch {batch.id} covers them"
            )
            legacy = []
        if unsigned:
            found.problems.append(_unsigned(unsigned))
            unsigned = []
        why = seal_signing.signature_problem(head, batch.signature, trusted)
        if why is not None:
            failed += 1
            # A trusted key whose signature fails means a rewrite; an unknown key may be a
            # retired one missing from LEDGER_VERIFY_KEYS, and the line says just that.
            rewritten = (
                ": its seals or the events they seal were rewritten after sealing"
                if head.key_id in trusted
                else ""
            )
            if failed <= _SHOWN:
                found.problems.append(
                    f"chain: {_span([batch])}, {_events_of(batch)}, {why}{rewritten}"
                )
    if failed > _SHOWN:
        found.problems.append(f"chain: {failed - _SHOWN} more seal batches fail their signature")
    if legacy:
        found.notes.append(
            f"chain: {_span(legacy)} {_were(legacy)} sealed before seals were signed, and no "
            "signed batch "
            "follows yet: until one does, only the unkeyed chain guards them"
        )
    if unsigned:
        found.problems.append(_unsigned(unsigned))
    return found


def _unsigned(run: list[_Batch]) -> str:
    return (
        f"chain: {_span(run)} {'carry' if len(run) > 1 else 'carries'} no signature, though "
        "seals from "
        f"#{settings.LEDGER_SIGNED_FROM_SEQ} on must (LEDGER_SIGNED_FROM_SEQ)"
    )


def chain_verify() -> list[str]:
    """Recompute the chain from the events; every difference is one line of the answer."""
    check = ChainCheck()
    for event, seq, stored in logged_events(with_seals=True):
        check.apply(event, seq, stored)
    return check.finish()
