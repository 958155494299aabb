"""Every benchmark script runs to its end and prints its figures, at sizes small enough for CI.

The figures themselves are not checked here: they are measurements, kept in docs/benchmarks.md
with the commands that produced them, and a timed assertion would only flake. What is checked
is that each script still runs against the hub as it is now (a real hub under gunicorn, on
PostgreSQL and Redis) and reports what its issue item asks for. Each run uses databases of its
own (`BENCH_DB_PREFIX`), dropped afterwards, so a benchmark run beside it is left alone."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parent.parent.parent
PREFIX = f"benchsmoke_{os.getpid()}_"

# (script, arguments, what its output must say): bench/run_all.sh's scripts, each with its item's
# figures, at a few seconds each.
HUB = ["--workers", "1", "--threads", "4"]
RUNS = [
    (
        "hotpath",
        ["--rounds", "1", "--seconds", "1", "--conns", "4", *HUB],
        ["÷ reference (target ≥ 0.8)", "  claim ", "  complete ", "  heartbeat "],
    ),
    ("inprocess", ["--requests", "20"], ["hub CPU ms/request", "  claim ", "  complete "]),
    (
        "throughput",
        ["--agents", "4", "--seconds", "2", "--repeats", "1", "--raw-threads", "4", *HUB],
        ["complete with want_next", "raw SQL through psycopg (same statements)"],
    ),
    (
        "dispatch",
        [
            "--agents",
            "2",
            "--jobs",
            "10",
            "--interval",
            "0.05",
            "--wait",
            "2",
            "--requeues",
            "2",
            *HUB,
        ],
        ["dispatch latency, ms", "10 of 10 submissions claimed", "2 of 2 requeued tasks claimed"],
    ),
    (
        "scale",
        ["--max-tasks", "1000", "--max-nodes", "100", "--samples", "20"],
        ["p99 ms (target ≤ 20)", "small-cpu: p99 at the largest size", "Execution Time"],
    ),
    (
        "fleet",
        [
            "--steps",
            "50",
            "--interval",
            "2",
            "--conns",
            "8",
            "--silent",
            "500",
            "--reaps",
            "1",
            *HUB,
        ],
        [
            "largest fleet served with p99 < 100 ms: 50",
            "hub CPU ms/beat",
            "500 nodes moved offline",
            # The reap's own statement, timed on the reaper's threads.
            "x  WITH due AS (",
        ],
    ),
    ("reaper_floor", ["--nodes", "1000", "--rounds", "1"], ["reap (nodes + events"]),
    (
        "verification",
        ["--agents", "4", "--tasks", "200", "--repeats", "1", *HUB],
        ["replicated ÷ unreplicated, tasks/s", "100 slices succeeded, 0 jobs not"],
    ),
    (
        "ledger_bench",
        ["--samples", "20", "--events", "2000", "--cashouts", "200"],
        ["of attempt_complete's wall time", "verdict: OK", "stream CSV s"],
    ),
    (
        "relay",
        [
            "--requests",
            "3",
            "--tokens",
            "20",
            "--streams",
            "10",
            "--stream-tokens",
            "5",
            "--ramp",
            "0.5",
        ],
        ["added TTFT: p50", "10 open at once; 10 finished, 0 failed"],
    ),
    (
        "hardware",
        ["--runs", "2", "--matmul-n", "128", "--stream-mb", "8", "--cpu-ms", "100"],
        ["cpu_gflops", "benchmark duration (sandbox start to report)", "the hub's check"],
    ),
    (
        "time_to_result",
        ["--jobs", "2", "--gap", "0.2"],
        ["submit → succeeded, ms", "start share", "warm 0"],
    ),
    (
        "pages",
        ["--jobs", "500", "--nodes", "320", "--agreed", "500", "--samples", "5"],
        [
            "p99 ms (target < 200)",
            "first page",
            "deep page (keyset)",
            "leaderboard recomputed each time",
            "leaderboard cached",
            "worst p99",
        ],
    ),
]


def _drop_ours() -> None:
    from bench.common import db_url

    with psycopg.connect(db_url("postgres"), autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", [PREFIX + "%"]
            )
        ]
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", autouse=True)
def own_databases():
    yield
    _drop_ours()


def _run(script: str, args: list[str], expected: list[str]) -> None:
    env = {**os.environ, "BENCH_DB_PREFIX": PREFIX}
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for text in expected:
        assert text in result.stdout, result.stdout[-3000:]
    assert "WARNING: requests refused" not in result.stdout


@pytest.mark.parametrize(("script", "args", "expected"), RUNS, ids=[r[0] for r in RUNS])
def test_the_benchmark_runs_and_reports(script, args, expected):
    _run(script, args, expected)


def test_the_instruction_count_runs_and_reports():
    """bench.instructions runs the hub's code under Valgrind (Debian's package: `.ci/run`
    installs it). Skipped without it, unless REQUIRE_VALGRIND=1 (CI), where that fails."""
    missing = [c for c in ("valgrind", "callgrind_control") if shutil.which(c) is None]
    if missing:
        message = f"{' and '.join(missing)} not on PATH (Debian's valgrind package)"
        if os.environ.get("REQUIRE_VALGRIND") == "1":
            pytest.fail(f"REQUIRE_VALGRIND=1 but {message}")
        pytest.skip(message)
    _run(
        "instructions",
        ["--beats", "3"],
        ["thousand instructions (as a WSGI hub)", "  body parse and check ", "frozen ÷ not"],
    )
