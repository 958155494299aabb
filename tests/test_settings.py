"""A bad environment stops start-up with a message naming the variable."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(env: dict[str, str], tmp_path: Path, *command: str) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}
    }
    base.update({"COMPUTEPOOL_VAR_DIR": str(tmp_path), "DEBUG": "1", **env})
    return subprocess.run(
        [sys.executable, "manage.py", *(command or ("check",))],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"DEBUG": "0"}, "SECRET_KEY must be set"),
        (
            {"DATABASE_URL": "mysql://root@localhost/x"},
            "DATABASE_URL must be a postgres:// URL",
        ),
        ({"DATABASE_URL": "not a url"}, "DATABASE_URL"),
        ({"CONN_MAX_AGE": "forever"}, "CONN_MAX_AGE='forever' is not an integer"),
        ({"DB_POOL_MAX_SIZE": "-1"}, "DB_POOL_MAX_SIZE=-1 is below the minimum 0"),
        ({"CELERY_BROKER_URL": "amqp://guest@localhost//"}, "CELERY_BROKER_URL must be"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD' must be one of"),
        ({"MAX_REQUEST_BYTES": "10"}, "MAX_REQUEST_BYTES=10 is below the minimum 1024"),
        ({"LEDGER_VERIFY_AT": "25:00"}, "LEDGER_VERIFY_AT='25:00' is not HH:MM"),
        ({"LEDGER_VERIFY_AT": "nightly"}, "LEDGER_VERIFY_AT='nightly' is not HH:MM"),
        ({"ALERT_WEBHOOK_URL": "ftp://x/y"}, "ALERT_WEBHOOK_URL must be an http:// or https://"),
        ({"METRICS_CACHE_S": "-1"}, "METRICS_CACHE_S=-1 is below the minimum 0"),
        ({"WEB_LOGIN_RATE": "lots"}, "WEB_LOGIN_RATE='lots' is not a rate"),
        ({"WEB_SIGNUP_OPEN": "perhaps"}, "WEB_SIGNUP_OPEN='perhaps' is not a boolean"),
        ({"ARTIFACT_STORAGE": "ftp"}, "ARTIFACT_STORAGE='ftp' must be one of local, s3"),
        ({"ARTIFACT_STORAGE": "s3"}, "ARTIFACT_S3_BUCKET must be set"),
        (
            {"ARTIFACT_STORAGE": "s3", "ARTIFACT_S3_BUCKET": "b", "ARTIFACT_S3_ENDPOINT_URL": "x"},
            "ARTIFACT_S3_ENDPOINT_URL must be an http:// or https:// URL",
        ),
        ({"ARTIFACT_URL_EXPIRE_S": "0"}, "ARTIFACT_URL_EXPIRE_S=0 is below the minimum 10"),
        (
            {"JOB_ARTIFACT_RETENTION_MAX_DAYS": "10", "JOB_ARTIFACT_RETENTION_DAYS": "30"},
            "JOB_ARTIFACT_RETENTION_DAYS=30 is above the maximum 10",
        ),
    ],
)
def test_it_refuses_a_bad_value_by_name(env, message, tmp_path):
    result = start(env, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


def test_s3_outputs_are_configured_from_the_environment(tmp_path):
    env = {
        "ARTIFACT_STORAGE": "s3",
        "ARTIFACT_S3_BUCKET": "outputs",
        "ARTIFACT_S3_ENDPOINT_URL": "https://store.example:9000",
        "ARTIFACT_S3_ADDRESSING_STYLE": "path",
    }
    shown = start(
        env,
        tmp_path,
        "shell",
        "-c",
        "from django.conf import settings; a = settings.STORAGES['artifacts']; "
        "print(a['BACKEND'], a['OPTIONS']['bucket_name'], a['OPTIONS']['endpoint_url'], "
        "a['OPTIONS']['addressing_style'])",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1].split() == [
        "storages.backends.s3.S3Storage", "outputs", "https://store.example:9000", "path",
    ]  # fmt: skip


def test_without_a_database_url_it_uses_the_embedded_postgresql(tmp_path):
    # No URL and no embedded server running: one line that says how to start it.
    result = start({"DATABASE_URL": ""}, tmp_path)
    assert result.returncode != 0
    assert "no embedded PostgreSQL runs on" in result.stderr
    assert "python -m computepool.embedded_db start" in result.stderr
    # Started, it is found from its own postmaster.pid: no URL to copy, no service needed.
    pgdata = tmp_path / "pgdata"
    started = subprocess.run(
        [sys.executable, "-m", "computepool.embedded_db", "start", str(pgdata)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip()
        assert url.startswith("postgres://postgres@/computepool?host=")
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env={**_without_database(), "COMPUTEPOOL_VAR_DIR": str(tmp_path), "DEBUG": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrate.returncode == 0, migrate.stderr
        assert (tmp_path / "broker" / "out").is_dir()
    finally:
        subprocess.run(
            [sys.executable, "-m", "computepool.embedded_db", "stop", str(pgdata)],
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    assert not (pgdata / "postmaster.pid").exists()


def _without_database() -> dict[str, str]:
    skip = {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}
    return {k: v for k, v in os.environ.items() if k not in skip}


@pytest.mark.django_db
def test_a_new_connection_starts_in_utc_and_sends_no_set_time_zone():
    # Django sends SET TIME ZONE on a connection whose session zone is not named 'UTC'; a woken
    # long-poll claim opens a connection on every wake-up, so the session starts in UTC instead.
    from django.db import connection

    connection.ensure_connection()
    assert connection.connection.info.parameter_status("TimeZone") == "UTC"
    assert connection._configure_timezone(connection.connection) is False


_POOLED = """
import json
from django.db import connection

def backend():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]

for _ in range(6):  # psycopg prepares a statement once it has run prepare_threshold (5) times
    first = backend()
connection.close()  # as a long-poll claim does before it waits
pool = connection.pool
stats = pool.get_stats()
held = stats["pool_size"] - stats["pool_available"]
again = backend()
with connection.cursor() as cursor:
    cursor.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%pg_backend_pid%'"
    )
    prepared = cursor.fetchone()[0]
print(json.dumps({"max_size": pool.max_size, "held": held, "same": first == again,
                  "prepared": prepared}))
"""


@pytest.mark.django_db
def test_a_pooled_process_hands_a_closed_connection_back_and_gets_it_back_warm(tmp_path):
    # The hub's launchers pool its connections (DB_POOL_MAX_SIZE): a waiting claim closes its
    # connection, and the claim its wake-up starts must get a warm one, not a new backend.
    from django.db import connection

    from tests.e2e.conftest import database_url

    # One connection in the pool, so that the one handed back is the one taken next (a pool of
    # several hands them out in turn).
    env = {"DATABASE_URL": database_url(connection.settings_dict), "DB_POOL_MAX_SIZE": "1"}
    shown = start(env, tmp_path, "shell", "-c", _POOLED)
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout.splitlines()[-1])
    assert result == {"max_size": 1, "held": 0, "same": True, "prepared": 1}
    # Unset, each thread keeps its own connection (Celery's prefork children, commands, tests).
    plain = start(
        {"DATABASE_URL": env["DATABASE_URL"], "CONN_MAX_AGE": "60"},
        tmp_path,
        "shell",
        "-c",
        "from django.db import connection; print(connection.pool, connection.settings_dict["
        "'CONN_MAX_AGE'])",
    )
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[-1].split() == ["None", "60"]


_BROKEN_IN_THE_POOL = """
import json
import psycopg
from django.db import OperationalError, connection

def backend():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]

first = backend()
connection.close()  # back to the pool, where the server then cuts it (as a restart would)
params = {k: v for k, v in connection.pool.kwargs.items() if k != "autocommit"}
with psycopg.connect(**params, autocommit=True) as other:
    other.execute("SELECT pg_terminate_backend(%s)", [first])
try:
    backend()
    failed = False
except OperationalError:
    failed = True
connection.close()  # as Django does at the end of the failed request
again = backend()
print(json.dumps({"failed": failed, "new": again != first}))
"""


@pytest.mark.django_db
def test_a_pooled_connection_is_lent_unchecked_and_a_broken_one_fails_one_request(tmp_path):
    # A pooled process lends connections without a round trip to check them (settings, "No
    # check before each loan"): one that broke in the pool fails the request that takes it (a
    # checked loan would have replaced it unseen), and the next request gets a working one.
    from django.db import connection

    from tests.e2e.conftest import database_url

    env = {"DATABASE_URL": database_url(connection.settings_dict), "DB_POOL_MAX_SIZE": "1"}
    shown = start(env, tmp_path, "shell", "-c", _BROKEN_IN_THE_POOL)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.splitlines()[-1]) == {"failed": True, "new": True}
