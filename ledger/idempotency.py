"""One request at a time per idempotency key, so that an identical repeat returns the original.

Each service that takes an idempotency key calls `idempotency_key_lock` first in its transaction,
before it looks the key up. A twin request that arrives while the first is in flight then waits
for the first's transaction to end and finds, in its next statement (READ COMMITTED reads what
committed), the original to replay; without the lock both missed the lookup, both wrote, and the
second's unique violation became a 409.
"""

from django.db import connection

# The first half of the two-part advisory lock key, so that key hashes never meet the one-part
# locks of the sealer and the exporter (PostgreSQL keeps the two kinds of key apart).
_SPACE = 0x1DE7


def idempotency_key_lock(key: str) -> None:
    """Hold `key` until the caller's transaction ends (call inside `transaction.atomic()`).

    Keys whose hashes collide merely wait for each other."""
    if not connection.in_atomic_block:
        raise RuntimeError("an idempotency key is locked inside the transaction that uses it")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_SPACE, key])
