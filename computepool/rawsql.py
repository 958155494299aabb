"""What the hot path's hand-written statements share: the lazy commit of a statement that is
its own transaction (the heartbeat's) or of a claim's transaction."""

from django.db import connection

# A subquery that turns off the wait for the WAL's flush for the transaction of the statement
# that holds it, and no further (`set_config(…, true)`): written into a statement that is its
# own transaction (`commits_alone`), so that it commits without that wait.
LAZY_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true))"


def commits_alone() -> bool:
    """Whether a statement run now is its own transaction: never a caller's
    (atomic, or autocommit off), whose other writes did not agree to a lazy commit."""
    return connection.get_autocommit() and not connection.in_atomic_block
