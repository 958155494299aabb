"""The client ships `py.typed`: its types must hold for the programs that rely on them."""

import subprocess
import sys

from tests.client.conftest import CLIENT_SRC


def test_the_client_passes_a_strict_type_check(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            "-p",
            "computepool_client",
        ],
        cwd=CLIENT_SRC,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
