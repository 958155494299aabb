"""Processes on the embedded default (SQLite and the filesystem broker, no services), for the
tests that check the hand-written SQL and the multi-process writes run there too."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """`python <args>` from the repository root."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def embedded_migrated(var_dir: Path, **settings: str) -> dict[str, str]:
    """An environment without the database, broker and Redis URLs (so the SQLite file and the
    broker live under `var_dir`), with `settings` added, and its database migrated."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"}
    }
    env.update(
        COMPUTEPOOL_VAR_DIR=str(var_dir),
        DEBUG="1",
        DJANGO_SETTINGS_MODULE="computepool.settings",
        **settings,
    )
    migrate = run(["manage.py", "migrate", "--noinput"], env)
    assert migrate.wait(180) == 0, migrate.stderr.read()
    return env


def script_lines(script: str, env: dict[str, str], timeout: float = 120) -> list[str]:
    """`python -c <script>` on `env`'s embedded default: the lines it printed, once it exited 0
    (read as it runs, so no output can fill the pipe and stall it)."""
    process = run(["-c", script], env)
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out.splitlines()
