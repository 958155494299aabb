"""A migration test's round trip on the test database."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def _migrate_to(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@contextmanager
def migrated_back_to(targets) -> Iterator[None]:
    """The test database migrated back to `targets` inside the block, and forward to the latest
    migrations again on leaving it, whatever happened inside (a migration test's round trip)."""
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        _migrate_to(targets)
        yield
    finally:
        _migrate_to(latest)
