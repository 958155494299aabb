"""A wake-up is published on the process's shared Redis connection, not on one it opens for
the occasion (a reaper's batch and every submitted job publish one)."""

import redis

from core.redis_client import redis_client
from jobs import wakeup


def test_a_wake_up_goes_out_on_the_processs_shared_connection(redis_wakeups, settings):
    shared = redis_client()
    assert shared is redis_client()
    connection_id = shared.client_id()  # the pool's one idle connection, now in use and back

    wakeup.notify_work()
    wakeup.notify_claims_end([1, 2, 3])

    others = redis.Redis.from_url(settings.REDIS_URL)
    clients = {int(c["id"]): c for c in others.client_list()}
    assert clients[connection_id]["cmd"] == "publish"
    assert redis_client().client_id() == connection_id
