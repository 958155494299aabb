"""The process's Redis client for short commands (a throttle's counters, a wake-up's publish).

One client per process and URL: it keeps a pool of connections, shared by the process's
threads, and redis-py reopens them in a forked child. A client made per call would open a new
connection to Redis every time. The timeouts bound what a Redis that stopped answering costs a
request. A blocking subscription (the work waker's listener) needs a client without them.
"""

import threading

from django.conf import settings

_clients: dict = {}
_lock = threading.Lock()


def redis_client():
    """The client for settings.REDIS_URL, or None without Redis (the embedded default)."""
    url = getattr(settings, "REDIS_URL", None)
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url)
            if client is None:
                import redis

                client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
                _clients[url] = client
    return client
