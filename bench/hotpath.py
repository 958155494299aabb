"""Hot-path efficiency: requests/s of heartbeat, claim and complete, each divided by the
requests/s of the reference endpoint (bench/urls.py: DRF + agent key + throttle + one
transaction with one UPDATE) on the same hub and database, in the same run.

Closed loop: N connections, each with its own node's agent key, send back to back for a few
seconds per endpoint; the endpoints take turns, round after round, and each ratio is the median
over rounds of (endpoint's rate / the reference's rate in that round). Also prints the hub's and
PostgreSQL's CPU milliseconds per request, and with --profile where the workers spend it.

    .venv/bin/python -m bench.hotpath [--rounds 3] [--seconds 6] [--conns 32] [--profile]
"""

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench import common

ENDPOINTS = ("reference", "heartbeat", "claim", "complete")


def seed(db: str, nodes: int, tasks: int, operators: int = 1) -> tuple[list[str], int]:
    common.django_setup(db)
    ops = common.operators(operators)
    _, keys = common.seed_nodes(nodes, operator_ids=ops)
    user_id, _ = common.submitter()
    slices = 10
    took = common.submit_jobs(user_id, tasks // slices, slices=slices)
    print(f"seeded {nodes} online nodes, {tasks} tasks in {tasks // slices} jobs ({took:.1f} s)")
    common.close_django_connections()
    common.vacuum_analyze(db)
    return keys, user_id


async def phase(
    hub: common.Hub, name: str, keys: list[str], leases: list, seconds: float, conns: int
) -> tuple[float, int, int, list[float]]:
    pool = [common.Conn(hub.port, keys[i % len(keys)]) for i in range(conns)]
    queue = leases if name == "complete" else None

    async def one(conn: common.Conn, _i: int) -> bool:
        if name == "reference":
            status, _ = await conn.request("POST", "/bench/ref", {"status": "available"})
            return status == 200
        if name == "heartbeat":
            status, _ = await conn.request("POST", "/api/v1/agent/heartbeat", common.HEARTBEAT_BODY)
            return status == 200
        if name == "claim":
            status, body = await conn.request("POST", "/api/v1/agent/claim", {"wait": 0})
            if status == 200:
                leases.append((conn.key, body["attempt_id"], body["lease_token"]))
            return status == 200
        if not queue:
            await asyncio.sleep(0.01)
            return False
        key, attempt_id, token = queue.pop()
        status, _ = await conn.request(
            "POST",
            f"/api/v1/agent/attempts/{attempt_id}/complete",
            {"lease_token": token, "exit_code": 0, "stdout_tail": "ok\n"},
            key=key,
        )
        return status == 200

    ok, failed, elapsed, lat = await common.closed_loop(
        pool, one, seconds=seconds, max_requests=200_000
    )
    for conn in pool:
        await conn.close()
    return ok / elapsed, ok, failed, lat


def breakdown(key: str, n: int = 500) -> None:
    """In this process: what the pieces every agent request pays cost (CPU ms each), next to
    narrower forms of the same lookup. Measurements, not proposals: the lead decides."""
    from django.core.cache import cache
    from django.db import connection

    from core.api.throttling import _counts
    from nodes.auth import resolve_agent_key
    from nodes.models import Node
    from people.keys import hash_key

    hashed = hash_key(key)
    needed = (
        "id", "operator_id", "state", "region", "tier", "gpu_count", "gpu_vram_mb",
        "compute_capability", "cpu_cores", "ram_mb", "disk_mb", "price_floor", "reliability",
        "cooldown_until", "throttled", "thermal_events", "event_version",
    )  # fmt: skip
    needed = tuple(f for f in needed if f in {f.name for f in Node._meta.fields} | {"operator_id"})
    columns = ", ".join(f"n.{c}" for c in needed)
    history = [time.time()] * 100

    def raw() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {columns} FROM nodes_agentkey k JOIN nodes_node n ON n.id = k.node_id "  # noqa: S608
                "JOIN auth_user u ON u.id = n.operator_id "
                "WHERE k.key_hash = %s AND n.key_revoked_at IS NULL AND u.is_active",
                [hashed],
            )
            cursor.fetchone()

    cases = {
        "resolve_agent_key as it stands": lambda: resolve_agent_key(key),
        "same filter, .only(the columns the hot path reads)": lambda: (
            Node.objects.filter(
                agent_key__key_hash=hashed, key_revoked_at__isnull=True, operator__is_active=True
            )
            .only(*needed)
            .first()
        ),
        "same filter and columns as one raw SQL statement": raw,
        "DRF's throttle as it was: cache get + set of a 100-entry history (Redis)": lambda: (
            cache.set("bench:throttle", cache.get("bench:throttle", history), 60)
        ),
        "the per-key throttle's counters (INCR, EXPIRE, GET: one round trip)": lambda: _counts(
            "bench:throttle:counts", int(time.time() // 60), 60
        ),
        "Django's connection health check (is_usable: SELECT 1)": connection.is_usable,
    }
    print("\nin-process breakdown (CPU ms per call, wall ms per call, median of 3 × 500 calls):")
    for label, fn in cases.items():
        cpu, wall = [], []
        for _ in range(3):
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                fn()
            cpu.append(1000 * (time.process_time() - c0) / n)
            wall.append(1000 * (time.perf_counter() - w0) / n)
        print(f"  {statistics.median(cpu):6.3f} CPU  {statistics.median(wall):6.3f} wall  {label}")
    cache.delete("bench:throttle")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument(
        "--operators",
        type=int,
        default=1,
        help="operators owning the 64 nodes (1: every settlement credits one earnings row)",
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--worker-class", default="gthread", choices=("gthread", "uvicorn"))
    parser.add_argument("--profile", action="store_true", help="py-spy the workers per endpoint")
    parser.add_argument(
        "--perf", action="store_true", help="perf the PostgreSQL backends per endpoint (root)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument(
        "--breakdown", action="store_true", help="in-process cost of auth, throttle, health check"
    )
    args = parser.parse_args()
    common.banner("hot path: requests/s against the reference endpoint")
    db = common.create_db("hotpath")
    # Enough queued tasks for every claim phase, so no claim finds the queue empty.
    tasks = int(args.rounds * args.seconds * 1000) // 10 * 10
    keys, _ = seed(db, nodes=64, tasks=tasks, operators=args.operators)
    if args.breakdown:
        breakdown(keys[0])
        common.close_django_connections()
    # The completes use leases claimed rounds earlier, and the idle heartbeats sent here extend
    # none: a lease must outlive the run, or late rounds complete expired leases (409s).
    lease_s = 600 + args.rounds * len(ENDPOINTS) * int(args.seconds + 5)
    hub = common.Hub(
        db,
        workers=args.workers,
        threads=args.threads,
        worker_class=args.worker_class,
        env={"JOB_LEASE_S": str(lease_s)},
    )
    print(f"hub: {hub.describe()}; load: {args.conns} keep-alive connections, closed loop")
    results: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    ratios: dict[str, list[float]] = {e: [] for e in ENDPOINTS[1:]}
    cpu: dict[str, list[tuple[float, float]]] = {e: [] for e in ENDPOINTS}
    latencies: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    failures: dict[str, int] = dict.fromkeys(ENDPOINTS, 0)
    profiles = Path(tempfile.mkdtemp(prefix="bench-hotpath-"))
    leases: list = []
    with hub:
        # Warm up: every worker imports its views and opens its connection.
        for name in ENDPOINTS[:2]:
            common.run(phase(hub, name, keys, leases, 1.5, args.conns))
        for r in range(args.rounds):
            round_rate: dict[str, float] = {}
            for name in ENDPOINTS:
                if name == "complete":
                    random.shuffle(leases)  # completes of one job would queue on its hold row
                workers = hub.worker_pids()
                hub_cpu0 = common.cpu_seconds(workers)
                pg_cpu0 = common.postgres_cpu_seconds(db)
                spies = []
                if args.profile and r == args.rounds - 1:
                    spies = common.pyspy_start(workers, int(args.seconds), profiles / name)
                perf = None
                if args.perf and r == args.rounds - 1:
                    backends = common.postgres_backend_pids(db)
                    perf = common.perf_start(backends, int(args.seconds), profiles / f"{name}.perf")
                rate, ok, failed, lat = common.run(
                    phase(hub, name, keys, leases, args.seconds, args.conns)
                )
                for spy in spies:
                    spy.wait(timeout=60)
                if perf is not None:
                    perf.wait(timeout=60)
                hub_cpu = common.cpu_seconds(workers) - hub_cpu0
                pg_cpu = common.postgres_cpu_since(db, pg_cpu0)
                round_rate[name] = rate
                results[name].append(rate)
                latencies[name].extend(lat)
                failures[name] += failed
                cpu[name].append((1000 * hub_cpu / max(ok, 1), 1000 * pg_cpu / max(ok, 1)))
            for name in ENDPOINTS[1:]:
                ratios[name].append(round_rate[name] / round_rate["reference"])
            print(
                f"round {r + 1}: "
                + ", ".join(f"{n} {round_rate[n]:.0f}/s" for n in ENDPOINTS)
                + f"  (leases left over: {len(leases)})"
            )
    rows = []
    for name in ENDPOINTS:
        hub_ms = statistics.median(c[0] for c in cpu[name])
        pg_ms = statistics.median(c[1] for c in cpu[name])
        rows.append(
            [
                name,
                common.spread(results[name]),
                common.spread(ratios[name]) if name in ratios else "1",
                f"{common.pct(latencies[name], 50):.1f} / {common.pct(latencies[name], 99):.1f}",
                f"{hub_ms:.2f}",
                f"{pg_ms:.2f}",
                failures[name],
            ]
        )
    print()
    common.table(
        rows,
        [
            "endpoint",
            "requests/s median (min, max)",
            "÷ reference (target ≥ 0.8)",
            "latency p50/p99 ms",
            "hub CPU ms/req",
            "PG CPU ms/req",
            "non-2xx",
        ],
    )
    refused = {name: n for name, n in failures.items() if n}
    if refused:
        print(f"\nWARNING: requests refused ({refused}): those endpoints' figures are not valid")
    if args.perf:
        for name in ENDPOINTS:
            print(f"\nPostgreSQL's backends during {name} (self share of perf samples):")
            print("\n".join(common.perf_summary(profiles / f"{name}.perf")))
    if args.profile:
        for name in ENDPOINTS:
            print(f"\nprofile of the workers during {name} (inclusive share of samples):")
            print("\n".join(common.pyspy_summary(profiles / name, top=40)))
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
