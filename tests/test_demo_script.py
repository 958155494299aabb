"""scripts/demo.sh's arguments: help and unknown arguments start nothing."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def demo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_prints_the_usage_and_starts_nothing(flag):
    done = demo(flag)
    assert done.returncode == 0
    assert "demo.sh manage CMD" in done.stdout and "demo.sh stop" in done.stdout
    assert "demo.sh reset" in done.stdout
    assert "Setting up" not in done.stdout


def test_an_unknown_argument_is_refused_with_the_usage():
    done = demo("--bogus")
    assert done.returncode == 2
    assert "unknown argument '--bogus'" in done.stderr and "demo.sh stop" in done.stderr
    assert done.stdout == ""
