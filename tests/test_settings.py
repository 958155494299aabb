"""A bad environment stops start-up with a message naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}
    }
    base.update({"COMPUTEPOOL_VAR_DIR": str(tmp_path), "DEBUG": "1", **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
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
        ({"CELERY_BROKER_URL": "amqp://guest@localhost//"}, "CELERY_BROKER_URL must be"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD' must be one of"),
        ({"MAX_REQUEST_BYTES": "10"}, "MAX_REQUEST_BYTES=10 is below the minimum 1024"),
        ({"LEDGER_VERIFY_AT": "25:00"}, "LEDGER_VERIFY_AT='25:00' is not HH:MM"),
        ({"LEDGER_VERIFY_AT": "nightly"}, "LEDGER_VERIFY_AT='nightly' is not HH:MM"),
        ({"ALERT_WEBHOOK_URL": "ftp://x/y"}, "ALERT_WEBHOOK_URL must be an http:// or https://"),
        ({"METRICS_CACHE_S": "-1"}, "METRICS_CACHE_S=-1 is below the minimum 0"),
        ({"WEB_LOGIN_RATE": "lots"}, "WEB_LOGIN_RATE='lots' is not a rate"),
        ({"WEB_SIGNUP_OPEN": "perhaps"}, "WEB_SIGNUP_OPEN='perhaps' is not a boolean"),
    ],
)
def test_it_refuses_a_bad_value_by_name(env, message, tmp_path):
    result = start(env, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


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
