"""Waking long-polling claims when work arrives, and ending a node's when it stops taking work,
without a database connection per waiter.

Each hub process keeps one listener (a Redis pub/sub subscription when REDIS_URL is set) and one
condition variable; a waiting claim sleeps on the condition, holding no database connection,
and tries to claim again when woken. Work wakes every waiter; a node's claims-end (it drained,
went offline, was quarantined or retired) wakes only that node's, which then find the node no
longer claims and answer empty. Without Redis (the embedded demo) waiters re-check on a short
interval instead. A notification is a hint, never a promise: the claim itself decides.
"""

import logging
import os
import threading
import time
from typing import NamedTuple

from django.conf import settings

from core.redis_client import redis_client

log = logging.getLogger(__name__)
CHANNEL = "computepool:work"
_POLL_WITHOUT_REDIS_S = 0.25
# A claims-end message on CHANNEL: this prefix, then the node ids, comma-separated.
_ENDS = b"end:"
# How long a node's claims-end is remembered: longer than any claim waits (the claim's `wait`
# is at most 30 s), so that a claim that looked before the end and waits after it still sees it.
_ENDS_KEPT_S = 60.0
_PRUNE_FROM = 1024


class Mark(NamedTuple):
    """What a waiter had seen before it looked for work: the work generation, and the last
    claims-end of its node."""

    generation: int
    ended: int | None


class _Waker:
    def __init__(self) -> None:
        self._generation = 0
        self._end_seq = 0
        # node id → (sequence number of its last claims-end, monotonic time of it)
        self._ends: dict[int, tuple[int, float]] = {}
        # Forgetting old ends walks them all: done only once they have doubled since the last
        # time, so a reaper's batches of thousands cost each end O(1).
        self._prune_at = _PRUNE_FROM
        self._fresh_locks()

    def _fresh_locks(self) -> None:
        # Also run in a forked child (below): a fork copies this process's locks as they are,
        # but not the listener thread that may hold one at that moment (it takes the condition
        # for every notification), so a child that kept them could hang at its first wake-up.
        # The child starts its own listener when it first waits.
        self._cond = threading.Condition()
        self._listener: threading.Thread | None = None
        self._lock = threading.Lock()

    def mark(self, node_id: int) -> Mark:
        """Take before looking for work; wait() then returns at any wake-up after it."""
        return Mark(self._generation, self._ended(node_id))

    def wake_local(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def end_claims_local(self, node_ids: list[int]) -> None:
        now = time.monotonic()
        with self._cond:
            self._end_seq += 1
            for node_id in node_ids:
                self._ends[node_id] = (self._end_seq, now)
            if len(self._ends) > self._prune_at:  # ends no waiter can still be waiting across
                self._ends = {
                    n: end for n, end in self._ends.items() if now - end[1] < _ENDS_KEPT_S
                }
                self._prune_at = max(_PRUNE_FROM, 2 * len(self._ends))
            self._cond.notify_all()

    def _ended(self, node_id: int) -> int | None:
        ended = self._ends.get(node_id)
        return ended[0] if ended else None

    def wait(self, since: Mark, node_id: int, timeout: float) -> None:
        """Sleep until work newer than `since`, a claims-end of `node_id` newer than `since`,
        or `timeout` seconds."""
        self._ensure_listener()
        deadline = time.monotonic() + timeout
        if not settings.REDIS_URL:
            timeout = min(timeout, _POLL_WITHOUT_REDIS_S)
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    self._generation != since.generation
                    or self._ended(node_id) != since.ended
                    or time.monotonic() >= deadline
                ),
                timeout,
            )

    def _ensure_listener(self) -> None:
        if not settings.REDIS_URL or (self._listener and self._listener.is_alive()):
            return
        with self._lock:
            if self._listener and self._listener.is_alive():
                return
            self._listener = threading.Thread(target=self._listen, name="work-waker", daemon=True)
            self._listener.start()

    def _listen(self) -> None:
        import redis

        backoff = 0.5
        while True:
            try:
                client = redis.Redis.from_url(settings.REDIS_URL)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                backoff = 0.5
                for message in pubsub.listen():
                    data = message.get("data")
                    if isinstance(data, bytes) and data.startswith(_ENDS):
                        self.end_claims_local([int(n) for n in data[len(_ENDS) :].split(b",")])
                    else:
                        self.wake_local()
            except Exception as exc:  # Redis restarts must not kill the process's waker
                log.warning("work waker lost Redis (%s); retrying in %.1fs", exc, backoff)
                self.wake_local()  # waiters re-check rather than sleep through an outage
                time.sleep(backoff)
                backoff = min(backoff * 2, 10)


waker = _Waker()
os.register_at_fork(after_in_child=waker._fresh_locks)


def _publish(message: bytes) -> None:
    client = redis_client()
    if client is not None:
        try:
            client.publish(CHANNEL, message)
        except Exception as exc:  # a lost hint only delays a claim until the next poll
            log.warning("could not publish a wake-up: %s", exc)


def notify_work() -> None:
    """Tell every hub process that work may be claimable (call after commit)."""
    waker.wake_local()
    _publish(b"1")


def notify_claims_end(node_ids: list[int]) -> None:
    """Tell every hub process to end these nodes' waiting claims (call after commit; the
    nodes' claims-end hook)."""
    waker.end_claims_local(node_ids)
    _publish(_ENDS + ",".join(map(str, node_ids)).encode())
