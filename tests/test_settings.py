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
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}
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
            "DATABASE_URL must be a sqlite:// or postgres://",
        ),
        ({"DATABASE_URL": "not a url"}, "DATABASE_URL"),
        ({"CONN_MAX_AGE": "forever"}, "CONN_MAX_AGE='forever' is not an integer"),
        ({"CELERY_BROKER_URL": "amqp://guest@localhost//"}, "CELERY_BROKER_URL must be"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD' must be one of"),
        ({"MAX_REQUEST_BYTES": "10"}, "MAX_REQUEST_BYTES=10 is below the minimum 1024"),
    ],
)
def test_it_refuses_a_bad_value_by_name(env, message, tmp_path):
    result = start(env, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_embedded_default_needs_no_services(tmp_path):
    result = start({}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "broker" / "out").is_dir()
