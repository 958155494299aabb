"""Waking long-polling claims when work arrives, without a database connection per waiter.

Each hub process keeps one listener (a Redis pub/sub subscription when REDIS_URL is set) and one
condition variable; a waiting claim sleeps on the condition, holding no database connection,
and tries to claim again when woken. Without Redis (the embedded demo) waiters re-check on a
short interval instead. A notification is a hint, never a promise: the claim itself decides.
"""

import logging
import os
import threading
import time

from django.conf import settings

log = logging.getLogger(__name__)
CHANNEL = "computepool:work"
_POLL_WITHOUT_REDIS_S = 0.25


class _Waker:
    def __init__(self) -> None:
        self._generation = 0
        self._fresh_locks()

    def _fresh_locks(self) -> None:
        # Also run in a forked child (below): a fork copies this process's locks as they are,
        # but not the listener thread that may hold one at that moment (it takes the condition
        # for every notification), so a child that kept them could hang at its first wake-up.
        # The child starts its own listener when it first waits.
        self._cond = threading.Condition()
        self._listener: threading.Thread | None = None
        self._lock = threading.Lock()

    def generation(self) -> int:
        return self._generation

    def wake_local(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, since: int, timeout: float) -> None:
        """Sleep until a wake-up newer than `since`, or `timeout` seconds."""
        self._ensure_listener()
        deadline = time.monotonic() + timeout
        if not settings.REDIS_URL:
            timeout = min(timeout, _POLL_WITHOUT_REDIS_S)
        with self._cond:
            self._cond.wait_for(
                lambda: self._generation != since or time.monotonic() >= deadline, timeout
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
                for _message in pubsub.listen():
                    self.wake_local()
            except Exception as exc:  # Redis restarts must not kill the process's waker
                log.warning("work waker lost Redis (%s); retrying in %.1fs", exc, backoff)
                self.wake_local()  # waiters re-check rather than sleep through an outage
                time.sleep(backoff)
                backoff = min(backoff * 2, 10)


waker = _Waker()
os.register_at_fork(after_in_child=waker._fresh_locks)


def notify_work() -> None:
    """Tell every hub process that work may be claimable (call after commit)."""
    waker.wake_local()
    if settings.REDIS_URL:
        import redis

        try:
            redis.Redis.from_url(settings.REDIS_URL).publish(CHANNEL, b"1")
        except Exception as exc:  # a lost hint only delays a claim until the next poll
            log.warning("could not publish a work notification: %s", exc)
