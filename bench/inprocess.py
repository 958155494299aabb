"""The hot path in this process, without HTTP: CPU per request of the reference, heartbeat (an
idle node's, and a busy node's carrying two leases), complete and claim through Django's test
client (the whole middleware and DRF stack), the PostgreSQL backend's CPU per request beside
it, and the statements each one sends.

Single-threaded and unloaded by any server, so the figures are the code's own cost: the place to
look before and after a change to the hot path (`--profile complete` for a cProfile).

    .venv/bin/python -m bench.inprocess [--requests 300] [--profile claim] [--show-sql]
"""

import argparse
import cProfile
import json
import os
import pstats
import time
from pathlib import Path
from typing import Any

from bench import common


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument(
        "--profile", choices=("reference", "heartbeat", "busy_heartbeat", "complete", "claim")
    )
    parser.add_argument("--sort", default="cumulative", help="pstats order for --profile")
    parser.add_argument("--show-sql", action="store_true", help="print each request's statements")
    parser.add_argument("--name", default="inprocess", help="database suffix")
    parser.add_argument(
        "--queued",
        type=int,
        default=0,
        help="tasks queued (default: as many as the run claims; the claim's plan depends on it)",
    )
    parser.add_argument(
        "--plans",
        action="store_true",
        help="list the prepared statements PostgreSQL plans anew on every call (custom plans)",
    )
    args = parser.parse_args()
    common.banner("hot path in process: CPU per request through the test client")
    n = args.requests
    db = common.create_db(args.name)
    common.django_setup(db)
    _, keys = common.seed_nodes(8, operator_ids=common.operators(1))
    user_id, _ = common.submitter()
    common.submit_jobs(user_id, max(2 * n + 200, args.queued) // 10, slices=10)
    common.vacuum_analyze(db)  # statistics, as autovacuum keeps them: the claim's plan uses them

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {keys[0]}"}

    def post(path: str, body: dict) -> dict:
        response = client.post(path, data=json.dumps(body), content_type="application/json", **auth)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status_code} {response.content[:200]!r}")
        return response.json()

    def reference() -> None:
        post("/bench/ref", {"status": "available"})

    def heartbeat() -> None:
        post("/api/v1/agent/heartbeat", common.HEARTBEAT_BODY)

    def claim() -> dict:
        return post("/api/v1/agent/claim", {"wait": 0})

    running: list[str] = []  # the leases a busy node's heartbeat carries (claimed below)

    def busy_heartbeat() -> None:
        post(
            "/api/v1/agent/heartbeat",
            {**common.HEARTBEAT_BODY, "status": "busy", "leases": running},
        )

    def complete(lease: dict) -> None:
        post(
            f"/api/v1/agent/attempts/{lease['attempt_id']}/complete",
            {"lease_token": lease["lease_token"], "exit_code": 0, "stdout_tail": "ok\n"},
        )

    running.extend(claim()["lease_token"] for _ in range(2))
    for _ in range(5):  # warm: imports, prepared statements, caches
        complete(claim())
        heartbeat()
        busy_heartbeat()
        reference()

    counts = {}
    for name, call in (
        ("reference", reference),
        ("heartbeat", heartbeat),
        ("busy_heartbeat", busy_heartbeat),
        ("claim", claim),
        ("complete", complete),
    ):
        # A completion's lease is claimed before the capture: only its own statements count.
        args_ = (claim(),) if name == "complete" else ()
        with CaptureQueriesContext(connection) as queries:
            call(*args_)
        sql = [q["sql"] for q in queries.captured_queries]
        counts[name] = len(sql)
        if args.show_sql:
            print(f"\n{name}: {len(sql)} statements (BEGIN and COMMIT included)")
            for statement in sql:
                print("   ", " ".join(statement.split())[:150])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    leases = [claim() for _ in range(n)]
    cases = {
        "reference": lambda i: reference(),
        "heartbeat": lambda i: heartbeat(),
        "busy_heartbeat": lambda i: busy_heartbeat(),
        "complete": lambda i: complete(leases[i]),
        "claim": lambda i: claim(),
    }
    rows = []
    for name, call in cases.items():
        profiler = cProfile.Profile() if args.profile == name else None
        cpu0, pg0 = time.process_time(), backend_cpu(pid)
        if profiler:
            profiler.enable()
        for i in range(n):
            call(i)
        if profiler:
            profiler.disable()
        cpu, pg = time.process_time() - cpu0, backend_cpu(pid) - pg0
        rows.append([name, counts[name], f"{1000 * cpu / n:.2f}", f"{1000 * pg / n:.2f}"])
        if profiler:
            print(f"\ncProfile of {n} × {name} ({args.sort}):")
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(40)
    print()
    common.table(rows, ["request", "statements", "hub CPU ms/request", "PG backend CPU ms/request"])
    if args.plans:
        print_plans(connection)
    common.close_django_connections()
    common.drop_db(db)


def print_plans(connection: Any) -> None:
    """The prepared statements of this run's connection, by how PostgreSQL planned their calls:
    a generic plan is built once and reused; a custom plan is built for every call's values,
    which costs the planner's CPU each time (PostgreSQL chooses one when the generic plan's
    estimate is worse than the custom plans' average)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans, statement FROM pg_prepared_statements "
            "ORDER BY custom_plans DESC, generic_plans DESC"
        )
        rows = cursor.fetchall()
    print(f"\nprepared statements: {len(rows)}")
    common.table(
        [[g, c, " ".join(text.split())[:110]] for g, c, text in rows],
        ["generic plans", "custom plans", "statement"],
    )


if __name__ == "__main__":
    main()
