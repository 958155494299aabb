"""The client's tests run the `computepool` command as a user does: a subprocess, from this
checkout's client/src (no install step), against a live hub (tests/e2e's `live_stack`)."""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import (  # noqa: F401 - fixtures used by the tests here
    ROOT,
    live_stack,
    live_stack_env,
    live_stack_process_env,
    pytest_runtest_makereport,
)

CLIENT_SRC = ROOT / "client" / "src"


@dataclass
class Cli:
    """`computepool …` with a hub, a key and a trace file (every request it sends, one JSON line
    each) in its environment, and nothing of the hub's on its path."""

    hub: str
    key: str
    trace: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPUTEPOOL_", "DJANGO"))}
        env.update(
            PYTHONPATH=str(CLIENT_SRC),
            COMPUTEPOOL_HUB=self.hub,
            COMPUTEPOOL_KEY=self.key,
            COMPUTEPOOL_TRACE=str(self.trace),
        )
        env.update(extra)
        return env

    def __call__(self, *args: str, cwd: Path | None = None, key: str | None = None):
        env = self.env() if key is None else self.env(COMPUTEPOOL_KEY=key)
        return subprocess.run(
            [sys.executable, "-m", "computepool_client", *args],
            cwd=cwd or ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )


@pytest.fixture
def client_src_on_path(monkeypatch) -> None:
    """computepool_client importable in this process, as it is for the command."""
    monkeypatch.syspath_prepend(str(CLIENT_SRC))
