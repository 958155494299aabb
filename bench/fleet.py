"""Fleet capacity: how many idle nodes, each beating every 30 s, one hub on this machine serves
with heartbeat p99 < 100 ms; then the reaper's time over 100k silent nodes.

Open loop: at each step every node of the step's fleet sends one heartbeat at a random moment
of one interval (so the rate is nodes / interval), whether or not earlier ones were answered;
latency runs from the moment a beat was due to its response, so a queue in front of the hub
counts (no coordinated omission). Beats share a bounded pool of keep-alive connections, as
agents behind a load balancer would. The ramp stops at the first step whose p99 passes 1 s.

The reaper: `nodes_reap()` in this process over 100k online nodes whose deadlines have passed
(each goes offline with its event; their leases go back through the jobs hook), three times
over fresh nodes.

    .venv/bin/python -m bench.fleet [--steps 1000,2500,5000,10000,20000] [--interval 30]
    .venv/bin/python -m bench.fleet --skip-ramp [--silent 100000 --reaps 3]   # the reaper alone
"""

import argparse
import asyncio
import random
import time

from bench import common


async def step(port: int, keys: list[str], interval: float, conns: int):
    pool: asyncio.Queue[common.Conn] = asyncio.Queue()
    for _ in range(conns):
        pool.put_nowait(common.Conn(port))
    start = time.perf_counter()
    due = sorted((start + random.uniform(0, interval), key) for key in keys)
    latencies: list[float] = []
    errors = [0]

    async def beat(at: float, key: str) -> None:
        conn = await pool.get()
        try:
            status, _ = await conn.request(
                "POST", "/api/v1/agent/heartbeat", common.HEARTBEAT_BODY, key=key
            )
            if status != 200:
                errors[0] += 1
        except (OSError, common.HttpError, asyncio.IncompleteReadError):
            errors[0] += 1
        finally:
            pool.put_nowait(conn)
        latencies.append((time.perf_counter() - at) * 1000)

    running = []
    for at, key in due:
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        running.append(asyncio.create_task(beat(at, key)))
    # Bounded: whatever is still queued after a further interval counts as failed.
    _, pending = await asyncio.wait(running, timeout=interval)
    for task in pending:
        task.cancel()
    errors[0] += len(pending)
    while not pool.empty():
        await pool.get_nowait().close()
    return latencies, errors[0], time.perf_counter() - start


def reaper(db: str, ops: list[int], silent: int, repeats: int, profile: bool):
    import cProfile
    import io
    import pstats

    from django.db import connection
    from django.db.backends.signals import connection_created

    from nodes.services import nodes_reap

    out = []
    statements: dict[str, list[float]] = {}

    def timed(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.setdefault(" ".join(sql.split())[:90], []).append(time.perf_counter() - t0)

    def time_connection(sender, connection, **kwargs):
        # The reap's batches run on NODE_REAPER_WORKERS threads (this one, for one worker), and
        # this thread's connection is closed before the reap: every connection the reap uses
        # is opened within it, and its statements are timed from then on.
        connection.execute_wrappers.append(timed)

    for r in range(repeats):
        common.seed_nodes(silent, operator_ids=ops, salt=f"silent{r}-", deadlines_in_s=-60)
        common.close_django_connections()
        common.vacuum_analyze(db, "nodes_node")
        profiler = cProfile.Profile() if profile and r == 0 else None
        statements.clear()
        connection_created.connect(time_connection)
        t0 = time.perf_counter()
        try:
            if profiler:
                profiler.enable()
            result = nodes_reap()
            if profiler:
                profiler.disable()
        finally:
            connection_created.disconnect(time_connection)
            # The worker threads' connections end with their threads; this thread's stays.
            if timed in connection.execute_wrappers:
                connection.execute_wrappers.remove(timed)
        out.append((time.perf_counter() - t0, result.offline))
        if r == 0:
            print("  statements of the first reap (wall s, summed over the reaper's threads):")
            for sql, times in sorted(statements.items(), key=lambda kv: -sum(kv[1]))[:6]:
                print(f"    {sum(times):6.2f} s  {len(times):3d}x  {sql}")
        if profiler:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(22)
            print("  cProfile of the first reap (cumulative, wall clock):")
            print("\n".join("    " + line for line in text.getvalue().splitlines()[6:40]))
        common.close_django_connections()
    return out


def ramp(args: argparse.Namespace, db: str, steps: list[int], keys: list[str]) -> None:
    hub = common.Hub(db, workers=args.workers, threads=args.threads)
    print(
        f"hub: {hub.describe()}; one beat per node per {args.interval:g} s, "
        f"{args.conns} keep-alive connections"
    )
    rows = []
    with hub:
        common.run(step(hub.port, keys[:200], 2, args.conns))  # warm up
        for nodes in steps:
            workers = hub.worker_pids()
            h0, p0 = common.cpu_seconds(workers), common.postgres_cpu_seconds(db)
            lat, errors, elapsed = common.run(
                step(hub.port, keys[:nodes], args.interval, args.conns)
            )
            h1, pg = common.cpu_seconds(workers), common.postgres_cpu_since(db, p0)
            p50, p99 = common.pct(lat, 50), common.pct(lat, 99)
            verdict = "ok" if p99 < 100 and not errors else "over"
            rows.append(
                [
                    nodes,
                    f"{nodes / args.interval:.0f}",
                    f"{len(lat) / elapsed:.0f}",
                    f"{p50:.1f}",
                    f"{p99:.1f}",
                    f"{max(lat):.0f}",
                    errors,
                    f"{100 * (h1 - h0) / elapsed:.0f}%",
                    # Per beat: steadier between runs than the step a fleet fails at, which
                    # moves by a whole step when the two cores' load shifts a little.
                    f"{1000 * (h1 - h0) / max(len(lat), 1):.2f}",
                    f"{100 * pg / elapsed:.0f}%",
                    verdict,
                ]
            )
            print(f"  {nodes} nodes: p50 {p50:.1f} ms, p99 {p99:.1f} ms, {errors} errors")
            if p99 > 1000 or errors > nodes // 100:
                break
    print()
    common.table(
        rows,
        [
            "nodes",
            "beats/s due",
            "beats/s answered",
            "p50 ms",
            "p99 ms (< 100)",
            "max ms",
            "errors",
            "hub CPU",
            "hub CPU ms/beat",
            "PG CPU",
            "",
        ],
    )
    served = [r[0] for r in rows if r[-1] == "ok"]
    print(f"  largest fleet served with p99 < 100 ms: {max(served) if served else 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="1000,2500,5000,10000,20000")
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--conns", type=int, default=128)
    parser.add_argument("--silent", type=int, default=100_000, help="nodes for the reaper")
    parser.add_argument("--reaps", type=int, default=3)
    parser.add_argument("--reaper-profile", action="store_true", help="cProfile the first reap")
    parser.add_argument("--skip-ramp", action="store_true", help="only the reaper")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--name", default="fleet", help="database suffix: bench_computepool_<name> (default fleet)"
    )
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    common.banner("fleet capacity: idle nodes beating every interval; the reaper")
    db = common.create_db(args.name)
    common.django_setup(db)
    ops = common.operators(max(max(steps), args.silent) // 1000 + 1, prefix="fleetop")
    _, keys = common.seed_nodes(0 if args.skip_ramp else max(steps), operator_ids=ops)
    common.close_django_connections()
    common.vacuum_analyze(db)
    if not args.skip_ramp:
        ramp(args, db, steps, keys)
    print(f"\nreaper: nodes_reap() over {args.silent} silent nodes (target < 1 s)")
    reaps = reaper(db, ops, args.silent, args.reaps, args.reaper_profile)
    for took, moved in reaps:
        print(f"  {took:.2f} s, {moved} nodes moved offline")
    print(f"  median {common.spread([t for t, _ in reaps])} s")
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
