"""A server process loads the application, imports every view and freezes what it holds before
its first request, under WSGI and ASGI alike."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import gc, sys
before = len(gc.get_objects())
import {module}
print(gc.get_freeze_count(), len(gc.get_objects()), "jobs.api" in sys.modules)
"""


@pytest.mark.parametrize("module", ["computepool.wsgi", "computepool.asgi"])
def test_the_application_is_warmed_and_frozen(module, tmp_path):
    unset = {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update({"COMPUTEPOOL_VAR_DIR": str(tmp_path), "DEBUG": "1"})
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    frozen, tracked, views = result.stdout.split()
    assert views == "True"  # the URL configuration, and with it the views, were imported
    # Everything the import left alive is in the permanent generation, out of every collection.
    assert int(frozen) > 50_000
    assert int(tracked) < 1_000
