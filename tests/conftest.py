"""Shared fixtures: named actors, API clients, and the PostgreSQL gate.

Named actors, as in every test here: alice submits jobs, bob operates nodes, carol is finance,
dave is an admin, and mallory holds every role's opposite: she is a submitter and an operator
who owns nothing of anyone else's.
"""

import os

import pytest
from django.db import connection

from tests.core.alerting import celery_queue  # noqa: F401 - a fixture for every test

REQUIRE_POSTGRES = os.environ.get("REQUIRE_POSTGRES") == "1"


def _patch_postgres_flush() -> None:
    """Let transactional tests empty the append-only tables between tests.

    Django's flush TRUNCATEs every table, which the ledger's triggers refuse (as they should
    in production). Only the test flush switches them off around its TRUNCATE, and back on.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.sql_flush
    if getattr(original, "_computepool_patched", False):
        return

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        statements = original(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
        guarded = [t for t in tables if t.startswith("ledger_") and t != "ledger_account"]
        before = [f"ALTER TABLE {t} DISABLE TRIGGER {t}_no_truncate;" for t in guarded]
        after = [f"ALTER TABLE {t} ENABLE ALWAYS TRIGGER {t}_no_truncate;" for t in guarded]
        return before + statements + after

    sql_flush._computepool_patched = True
    DatabaseOperations.sql_flush = sql_flush


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("django"):
        _patch_postgres_flush()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs_pg = [item for item in items if item.get_closest_marker("postgres")]
    if not needs_pg:
        return
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return
    if REQUIRE_POSTGRES:
        raise pytest.UsageError(
            f"REQUIRE_POSTGRES=1 but DATABASE_URL is not PostgreSQL: {len(needs_pg)} "
            "PostgreSQL-only tests would be skipped"
        )
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL=postgres://…)")
    for item in needs_pg:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _vouched_pool(settings) -> None:
    """The pool of every test that is not about trust: its nodes are trusted from their first
    claim and never spot-checked, as before trust had to be earned, so each of those tests
    keeps to its own subject. The tests of earned trust and verification
    (tests/jobs/test_verification.py, tests/e2e/test_verification.py) set the production rules
    back (`earned_trust`)."""
    settings.JOB_TRUST_AFTER_VERIFIED = 0
    settings.JOB_SPOTCHECK_MAX_PCT = 0


@pytest.fixture(autouse=True)
def _fresh_metrics(settings) -> None:
    """Every scrape reads the database: a gauge one test cached must not answer another's."""
    settings.METRICS_CACHE_S = 0


# The same pool for the processes of a live stack (tests/e2e/conftest.py).
VOUCHED_POOL_ENV = {"JOB_TRUST_AFTER_VERIFIED": "0", "JOB_SPOTCHECK_MAX_PCT": "0"}


@pytest.fixture
def earned_trust(settings) -> None:
    """Trust earned as in production, after 3 verified results; every result of an untrusted
    node spot-checked."""
    from jobs.verification import forget_checkers

    settings.JOB_TRUST_AFTER_VERIFIED = 3
    settings.JOB_SPOTCHECK_MAX_PCT = 100
    settings.JOB_SPOTCHECK_MIN_PCT = 0
    forget_checkers()


@pytest.fixture
def pg() -> None:
    assert connection.vendor == "postgresql"


def _user(username: str, roles: list[str]):
    from people.services import user_create

    return user_create(username=username, roles=roles, password="correct horse battery staple")


@pytest.fixture
def alice(db):
    return _user("alice", ["submitter"])


@pytest.fixture
def bob(db):
    return _user("bob", ["operator"])


@pytest.fixture
def carol(db):
    return _user("carol", ["finance"])


@pytest.fixture
def dave(db):
    from django.contrib.auth import get_user_model

    user = _user("dave", ["admin"])
    get_user_model().objects.filter(pk=user.pk).update(is_staff=True, is_superuser=True)
    user.refresh_from_db()
    return user


@pytest.fixture
def mallory(db):
    return _user("mallory", ["submitter", "operator"])


def key_for(user, role: str) -> str:
    from people.services import api_key_create

    _, secret = api_key_create(user=user, role=role, name=f"{user.username}-{role}")
    return secret


def client_with_key(key: str):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def api():
    """Build an API client acting as (user, role): api(alice, "submitter")."""

    def make(user, role: str):
        return client_with_key(key_for(user, role))

    return make


# Data migrations' seeds: a transactional test's flush empties every table, seeds included.
_SEEDS = (
    "nodes.migrations.0002_seed_gpu_tiers",
    "nodes.migrations.0012_tier_benchmark_ranges",
    "ledger.migrations.0004_seed_price_books",
)


def reseed() -> None:
    import importlib

    from django.apps import apps

    for module in _SEEDS:
        importlib.import_module(module).seed(apps, None)


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest) -> None:
    """pytest-django runs transactional tests after all others: re-seed before each of them.
    Every test starts with no price or rule remembered from another test's database."""
    from jobs import billing
    from ledger import pricing

    billing._spot_cache.clear()
    billing._tier_cache.clear()
    pricing.rules_forget()
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or (
        marker is not None and marker.kwargs.get("transaction")
    )
    if transactional:
        request.getfixturevalue("transactional_db")
        reseed()
