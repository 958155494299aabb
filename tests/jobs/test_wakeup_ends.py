"""A node's claims-end wakes that node's waiting claims and no other's, even one that arrives
between the waiter's look for work and its sleep."""

import threading
import time

from jobs.wakeup import _Waker


def _waited(waker: _Waker, node_id: int, end_for: int, timeout: float = 3.0) -> float:
    mark = waker.mark(node_id)
    started = time.monotonic()
    threading.Timer(0.2, waker.end_claims_local, args=([end_for],)).start()
    waker.wait(mark, node_id, timeout)
    return time.monotonic() - started


def test_an_end_wakes_its_nodes_waiter_and_no_other(settings):
    # As with Redis (no 250 ms re-check), but no listener: only what this process says.
    settings.REDIS_URL = "redis://unused"
    waker = _Waker()
    waker._ensure_listener = lambda: None
    assert _waited(waker, 5, end_for=5) < 1.5
    assert _waited(waker, 5, end_for=6, timeout=1.0) >= 1.0


def test_an_end_between_the_look_and_the_sleep_is_not_lost(settings):
    settings.REDIS_URL = "redis://unused"
    waker = _Waker()
    waker._ensure_listener = lambda: None
    mark = waker.mark(7)
    waker.end_claims_local([7])  # while the claim was looking for work
    started = time.monotonic()
    waker.wait(mark, 7, 3.0)
    assert time.monotonic() - started < 0.5


def test_many_ends_are_remembered_and_old_ones_forgotten(monkeypatch):
    from jobs import wakeup

    waker = _Waker()
    now = [1000.0]
    monkeypatch.setattr(wakeup.time, "monotonic", lambda: now[0])
    waker.end_claims_local(list(range(5000)))
    assert len(waker._ends) == 5000  # all recent: a waiter may still be across any of them
    now[0] += wakeup._ENDS_KEPT_S + 1
    waker.end_claims_local(list(range(5000, 20000)))
    assert set(waker._ends) == set(range(5000, 20000))
