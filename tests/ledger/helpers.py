"""Small builders for ledger tests."""

import json
import threading

from django.db import connection, transaction

from ledger.models import Account
from ledger.registry import STR, register
from ledger.services import account_open, event_append

# A payload with no money in it, so bare events leave the books alone.
register("TestNoted", properties={"memo": STR})


def open_account(code: str, kind: str = "test", **kwargs) -> Account:
    with transaction.atomic():
        return account_open(code=code, kind=kind, **kwargs)


def funded(code: str, amount: int) -> Account:
    """An account holding `amount`, funded from the external funding account."""
    from ledger.services import transfer

    source = open_account("external:funding", kind="funding")
    account = open_account(code)
    transfer(source=source, destination=account, amount=amount, actor="test", kind="topup")
    account.refresh_from_db()
    return account


def fingerprint(stream: str, type: str, payload: dict) -> str:
    """The log's fingerprint of a request, by its one rule (the `ledger_fingerprint` function)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ledger_fingerprint(%s, %s, %s::jsonb)", [stream, type, json.dumps(payload)]
        )
        return cursor.fetchone()[0]


def append(stream: str, memo: str = "x", **kwargs):
    """Append a TestNoted event with a chosen memo in its own transaction."""
    with transaction.atomic():
        return event_append(
            stream=stream, type="TestNoted", actor="test", payload={"memo": memo}, **kwargs
        )


def rewrite_as_superuser(statement: str, table: str) -> None:
    """PostgreSQL: run `statement` with `table`'s own triggers off, as a superuser tampering with
    the log would, then turn them back on."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cursor.execute(statement)
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
            [table],
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}")


def race(n: int, work, *, start_s: float = 10, join_s: float = 30) -> list[object]:
    """Run `work(i)` in n threads, each with its own connection, released together; each
    thread's result or exception. A thread still running after `join_s` fails the test."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=start_s)
            results[i] = work(i)
        except Exception as exc:  # the race's loser raises; the test asserts on it
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=join_s)
    assert not any(t.is_alive() for t in threads), "a worker hung (deadlock?)"
    return results


def recompute_unkeyed_chain() -> None:
    """As a database owner without the ledger's key would after editing an event: every seal's
    hash and every batch's head recomputed from the events as they now are."""
    from ledger.chain import GENESIS, link_hash
    from ledger.models import EventSeal

    previous, values = GENESIS, []
    for seal in EventSeal.objects.select_related("event").order_by("seq"):
        previous = link_hash(previous, seal.event)
        values.append(f"({seal.seq}, '{previous}')")
    rewrite_as_superuser(
        "UPDATE ledger_eventseal s SET hash = v.hash "
        f"FROM (VALUES {', '.join(values)}) AS v(seq, hash) WHERE s.seq = v.seq",
        "ledger_eventseal",
    )
    rewrite_as_superuser(
        "UPDATE ledger_sealbatch b SET head_hash = s.hash FROM ledger_eventseal s "
        "WHERE s.seq = b.last_seq",
        "ledger_sealbatch",
    )
