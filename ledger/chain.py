"""Tamper evidence: events sealed into a hash chain, and the check that recomputes it.

Why a horizon and not "every id above the last sealed one": ids are handed out when a row is
inserted, not when its transaction commits. A transaction that took id 10 and commits after the
one that took id 11 would be skipped by a sealer that already passed 11. On PostgreSQL every event
records its transaction id (a trigger sets it), and a pass seals only events whose transaction is
older than the oldest one still open in this database: that set can no longer grow, so nothing is
ever skipped. A pass takes the events between the previous pass's horizon and its own, in id
order. On SQLite, writers are serialised (BEGIN IMMEDIATE), ids follow commit order, and the last
sealed id is the horizon.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from ledger.canonical import canonical_json, sha256_hex
from ledger.models import Event, EventSeal, SealBatch

GENESIS = "0" * 64
# pg_advisory_xact_lock key: one sealer at a time, so a double-fired beat seals nothing twice.
_SEAL_LOCK_KEY = 0x5EA1


def event_digest(event: Event) -> bytes:
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


def link_hash(previous: str, event: Event) -> str:
    return sha256_hex(previous.encode() + b"\n" + event_digest(event))


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


# The oldest transaction still open in THIS database, as a 64-bit txid. pg_stat_activity shows
# 32-bit xids: widen each against our own (newer) txid; one newer than ours (it started after we
# did) widens to a huge distance and is left out — it cannot have written an event below ours.
# Transactions in other databases on the same server are ignored: they cannot write our events,
# and a long one elsewhere must not stall sealing here (pg_snapshot_xmin is server-wide).
_OLDEST_OPEN_SQL = """
WITH me AS (SELECT pg_current_xact_id()::text::bigint AS xid),
open AS (
  SELECT ((me.xid - a.backend_xid::text::bigint) % 4294967296 + 4294967296) % 4294967296
         AS distance
    FROM pg_stat_activity a, me
   WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL
     AND a.pid <> pg_backend_pid()
)
SELECT me.xid - COALESCE(max(open.distance) FILTER (WHERE open.distance < 2147483648), 0)
  FROM me LEFT JOIN open ON true GROUP BY me.xid
"""


def _pg_horizon(previous: int, limit: int) -> int:
    """The exclusive txid bound of this pass: below every open transaction, ~`limit` events."""
    with connection.cursor() as cursor:
        cursor.execute(_OLDEST_OPEN_SQL)
        oldest_open = max(cursor.fetchone()[0], previous)
        cursor.execute(
            "SELECT txid FROM ledger_event WHERE txid >= %s AND txid < %s "
            "ORDER BY txid OFFSET %s LIMIT 1",
            [previous, oldest_open, limit],
        )
        row = cursor.fetchone()
    if row is None:
        return oldest_open
    # Whole transactions only: a pass never splits one transaction's events.
    return row[0] if row[0] > previous else row[0] + 1


@dataclass(frozen=True)
class SealResult:
    sealed: int
    head: str
    batch_id: int | None


def chain_seal(*, limit: int = 5000) -> SealResult:
    """Seal the next events into the chain. Idempotent: with nothing new it writes nothing."""
    with transaction.atomic():
        if _is_postgres():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SEAL_LOCK_KEY])
        last = SealBatch.objects.order_by("-id").first()
        head = last.head_hash if last else GENESIS
        seq = (last.last_seq or 0) if last else 0
        if _is_postgres():
            previous = (last.horizon_txid or 0) if last else 0
            horizon = _pg_horizon(previous, limit)
            events = list(Event.objects.filter(txid__gte=previous, txid__lt=horizon).order_by("id"))
            batch_fields = {"horizon_txid": horizon}
        else:
            after = (last.last_event_id or 0) if last else 0
            events = list(Event.objects.filter(id__gt=after).order_by("id")[:limit])
            batch_fields = {"last_event_id": events[-1].id if events else after}
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
            **batch_fields,
        )
        EventSeal.objects.bulk_create(
            EventSeal(seq=s, event=e, batch=batch, hash=h) for s, e, h in seals
        )
        return SealResult(len(seals), head, batch.id)


def chain_head() -> str:
    last = SealBatch.objects.order_by("-id").first()
    return last.head_hash if last else GENESIS


def _seals_in_order(chunk: int = 5000) -> Iterator[EventSeal]:
    return EventSeal.objects.select_related("event").order_by("seq").iterator(chunk_size=chunk)


def chain_verify() -> list[str]:
    """Recompute the chain from the events; every difference is one line of the answer."""
    problems: list[str] = []
    previous = GENESIS
    expected_seq = 1
    for seal in _seals_in_order():
        if seal.seq != expected_seq:
            problems.append(f"chain: seal #{expected_seq} is missing (next is #{seal.seq})")
            expected_seq = seal.seq
        recomputed = link_hash(previous, seal.event)
        if recomputed != seal.hash:
            event = seal.event
            problems.append(
                f"chain: event {event.id} ({event.stream}@{event.version} {event.type}) "
                f"does not match seal #{seal.seq}: it was changed after it was sealed"
            )
        # Go on from the stored hash so one rewritten event is reported once, not cascaded.
        previous = seal.hash
        expected_seq += 1
    last = SealBatch.objects.order_by("-id").first()
    if last is None:
        return problems
    if last.head_hash != previous:
        problems.append(
            f"chain: head {last.head_hash[:16]} of batch {last.id} is not the last "
            f"seal's hash {previous[:16]}"
        )
    if _is_postgres():
        skipped = Event.objects.filter(seal__isnull=True, txid__lt=last.horizon_txid)
    else:
        skipped = Event.objects.filter(seal__isnull=True, id__lte=last.last_event_id)
    for event_id in skipped.values_list("id", flat=True)[:20]:
        problems.append(f"chain: event {event_id} is below the sealed horizon but not sealed")
    return problems
