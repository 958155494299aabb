"""End-to-end throughput: tasks/s through claim → complete → settle with simulated agents over
HTTP, next to the raw-SQL ceiling of the same statements sent through psycopg in the same run.

Agents (asyncio, keep-alive, loopback) each hold one node's agent key. Two agent loops:
- `next`: complete with want_next=true, so one request completes a task and leases the next;
- `pairs`: claim, then complete (two requests per task; what the design's bare baseline did).
Every task is a one-slice job with its credits held, so each completion settles (held →
earnings + revenue), finishes its job and releases the rest of the hold, as in production.

The ceiling runs the statements the hub sends for one task (`--in-process N` prints them),
written by hand, through psycopg from threads: claim (6, plus 2 for a job's first task),
complete (14, plus 10 for a job's last task), the node's reliability (2), without HTTP, Django or
the agent-key lookup. Keep it in step with the hub.

    .venv/bin/python -m bench.throughput [--agents 32] [--seconds 12] [--repeats 3]
"""

import argparse
import json
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench import common


def seed_jobs(count: int, submitter_id: int) -> None:
    """`count` one-slice jobs with their credits held (held accounts written directly)."""
    from django.db import connection

    common.seed_queue(count, submitter_id=submitter_id, slices_per_job=1, gpu_share=0)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET max_cost = price_ceiling * timeout_s * slices")
        cursor.execute(
            "INSERT INTO ledger_account (code, kind, owner_id, currency, balance, allow_negative, "
            "projected, created_at) SELECT 'job:' || j.id || ':held', 'held', j.submitter_id, "
            "'CRD', j.max_cost, false, true, now() FROM jobs_job j WHERE NOT EXISTS "
            "(SELECT 1 FROM ledger_account a WHERE a.code = 'job:' || j.id || ':held')"
        )


# --- agents over HTTP -------------------------------------------------------------------------


async def agents(port: int, keys: list[str], seconds: float, mode: str) -> tuple[int, int]:
    deadline = time.perf_counter() + seconds
    done = [0, 0]

    async def agent(key: str) -> None:
        conn = common.Conn(port, key)
        lease = None
        while time.perf_counter() < deadline:
            if lease is None:
                status, body = await conn.request("POST", "/api/v1/agent/claim", {"wait": 0})
                if status != 200:
                    break  # the queue is empty
                lease = body
            status, body = await conn.request(
                "POST",
                f"/api/v1/agent/attempts/{lease['attempt_id']}/complete",
                {
                    "lease_token": lease["lease_token"],
                    "exit_code": 0,
                    "stdout_tail": "ok\n",
                    "want_next": mode == "next",
                },
            )
            done[0 if status == 200 else 1] += 1
            lease = body.get("next") if status == 200 and mode == "next" else None
        await conn.close()

    await common.asyncio.gather(*(agent(k) for k in keys))
    return done[0], done[1]


# --- the raw-SQL ceiling ----------------------------------------------------------------------


# The ledger's one door (ledger/sql/append.sql), as `ledger.writes` calls it: arrays, one
# element per event.
_APPEND = (
    "SELECT id FROM ledger_append(%s::text[], %s::text[], %s::int[], %s::text[]::jsonb[], "
    "%s::text[], %s::int[], %s::text[], now())"
)


def _append(cur, events: list[tuple]) -> None:
    """Events (stream, expected version or None, type, payload, actor) in one door call."""
    columns = [[], [], [], [], [], [], []]
    for stream, expected, type_, payload, actor in events:
        for column, value in zip(
            columns, (stream, type_, 1, json.dumps(payload), actor, expected, None), strict=True
        ):
            column.append(value)
    cur.execute(_APPEND, columns)


def _event(cur, stream: str, version: int | None, type_: str, payload: dict, actor: str, key=None):
    """One event through the door on its own, as the hub sends it; returns the event's id."""
    sql, params = _event_sql(stream, version, type_, payload, actor, key)
    cur.execute(sql, params)
    return cur.fetchone()[0]


def _event_sql(stream: str, version: int | None, type_: str, payload: dict, actor: str, key=None):
    """One event's door call, text and parameters (`version` None: at the stream's end)."""
    expected = None if version is None else version - 1
    return (
        "SELECT * FROM ledger_append(ARRAY[%s]::text[], ARRAY[%s]::text[], ARRAY[1], "
        "ARRAY[%s::jsonb], ARRAY[%s]::text[], ARRAY[%s]::int[], ARRAY[%s]::text[], now())",
        [stream, type_, json.dumps(payload), actor, expected, key],
    )


def _entry_post(
    cur, event: tuple, kind: str, legs: list[tuple[int, int]], unprojected=None
) -> None:
    """An entry whole through the ledger's `ledger_post`, as the hub sends it
    (`ledger.writes.entry_post`): `event` is (stream, expected version, type, payload, actor,
    key); the postings, then the balance moves in id order."""
    stream, expected, type_, payload, actor, key = event
    moves = sorted(leg for leg in legs if leg[0] != unprojected)
    cur.execute(
        "SELECT * FROM ledger_post(%s, %s, 1, %s::jsonb, %s, %s, %s, now(), %s, %s::bigint[], "
        "%s::bigint[], %s::text[], %s::bigint[], %s::bigint[])",
        [stream, type_, json.dumps(payload), actor, expected, key, kind,
         [a for a, _ in legs], [m for _, m in legs], ["CRD"] * len(legs),
         [a for a, _ in moves], [m for _, m in moves]],
    )  # fmt: skip


class RawAgent:
    """One node's claim → complete → settle loop as plain SQL on its own connection."""

    def __init__(self, dsn: str, node: dict) -> None:
        # The hub's own statements, imported once Django is set up.
        from core.sql import statement
        from jobs.claim import claim_statement
        from nodes.services.reliability import half_life_s

        self.conn = psycopg.connect(dsn)
        self.node = n = node
        self.profile = n["profile"]  # the hub's own profile of the node (jobs.node_profile)
        # The hub's statement for an outcome (a success here).
        self.success_sql = statement("nodes", "record_outcome")
        self.half_life_s = half_life_s()
        self.count_sql = statement("jobs", "count_and_finish")
        self.delivery_sql = statement("webhooks", "delivery_open")
        self.claim_statement = claim_statement

    def claim(self) -> tuple | None:
        # The hub's own claim statement (`claim_statement`), its events appended by itself, on
        # its own: it commits lazily.
        now = datetime.now(UTC)
        sql, params, attempt = self.claim_statement(self.profile, now, lazy=True)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        if row is None or row[0] is None:  # the node moved (none do here), or no task
            return None
        return row[-3], attempt.lease_token

    def complete(self, attempt_id: int, token: str) -> None:
        n, now = self.node, datetime.now(UTC)
        cur = self.conn.cursor()
        # The fenced read, with the settlement's figures and the artifact count (autocommit).
        self.conn.autocommit = True
        cur.execute(
            'SELECT a.task_id, t.job_id, t."index", t.version, a.leased_at, j.timeout_s, '
            "a.state, a.lease_expires_at, j.submitter_id, nd.operator_id, a.price_per_s, nd.tier, "
            "nd.region, j.kind, (SELECT COUNT(*) FROM jobs_artifact x WHERE x.attempt_id = a.id) "
            "FROM jobs_attempt a JOIN jobs_task t ON t.id = a.task_id "
            "JOIN jobs_job j ON j.id = t.job_id JOIN nodes_node nd ON nd.id = a.node_id "
            "WHERE a.id = %s AND a.lease_token = %s AND a.node_id = %s",
            [attempt_id, token, n["id"]],
        )
        (task_id, job_id, index, version, leased_at, timeout_s, _, _, submitter_id, operator_id,
         price, _, _, _, _) = cur.fetchone()  # fmt: skip
        self.conn.autocommit = False
        runtime = max(0, int((now - leased_at).total_seconds() * 1000))
        with self.conn.transaction():
            # The node's reliability (decayed and counted in SQL), the attempt's
            # compare-and-set and its task (one statement), then AttemptSucceeded through the
            # door (`_succeed`).
            cur.execute(
                self.success_sql,
                {
                    "now": now,
                    "half": self.half_life_s,
                    "pa": 1.0,
                    "pb": 1.0,
                    "success": True,
                    "node": n["id"],
                },
            )
            cur.execute(
                "WITH won AS (UPDATE jobs_attempt SET state = 'succeeded', finished_at = %(now)s, "
                "runtime_ms = %(runtime)s, exit_code = 0, stdout_tail = 'ok', stderr_tail = '', "
                "reported_runtime_s = NULL, progress = 100 WHERE id = %(attempt)s "
                "AND lease_token = %(token)s AND state IN ('leased', 'running') "
                "AND lease_expires_at > %(now)s RETURNING id), "
                "task AS (UPDATE jobs_task SET state = 'succeeded', finished_at = %(now)s, "
                "version = version + 1 WHERE id = %(task)s AND current_attempt_id = %(attempt)s "
                "AND EXISTS (SELECT 1 FROM won) RETURNING id) "
                "SELECT (SELECT count(*) FROM won), (SELECT count(*) FROM task)",
                {"now": now, "runtime": runtime, "attempt": attempt_id, "token": token,
                 "task": task_id},
            )  # fmt: skip
            _append(
                cur,
                [(f"task:{task_id}", version, "AttemptSucceeded",
                  {"task_id": task_id, "job_id": job_id, "index": index,
                   "attempt_id": attempt_id, "node_id": n["id"], "runtime_ms": runtime,
                   "exit_code": 0, "artifacts": []},
                  f"node:{n['id']}")],
            )  # fmt: skip
            # The job's hold locked, with the book's fee and the accounts the settlement and
            # the release credit (`billing.hold_lock`); a fresh settlement looks for no earlier
            # one.
            cur.execute(
                "SELECT h.id, h.balance, e.id, r.id, v.id, (SELECT b.id FROM ledger_pricebook b "
                "WHERE b.effective_from <= %s ORDER BY b.effective_from DESC LIMIT 1), "
                "(SELECT b.platform_fee_bps FROM ledger_pricebook b WHERE b.effective_from <= %s "
                "ORDER BY b.effective_from DESC LIMIT 1) FROM ledger_account h "
                "LEFT JOIN ledger_account e ON e.code = %s "
                "LEFT JOIN ledger_account r ON r.code = %s "
                "LEFT JOIN ledger_account v ON v.code = %s WHERE h.code = %s FOR UPDATE OF h",
                [leased_at, leased_at, f"user:{operator_id}:earnings", "platform:revenue",
                 f"user:{submitter_id}:available", f"job:{job_id}:held"],
            )  # fmt: skip
            held_id, held_balance, earnings, revenue, available, book, fee_bps = cur.fetchone()
            # The job's counter and, for its last task, its end (`_count_and_finish`),
            # JobFinished and its webhook's delivery (none here: no job names one).
            cur.execute(self.count_sql, {"s": 1, "f": 0, "c": 0, "job": job_id, "now": now})
            succeeded, _, _, done, _ = cur.fetchone()
            if done:
                _event(
                    cur, f"job:{job_id}", None, "JobFinished",
                    {"job_id": job_id, "state": "succeeded", "succeeded": succeeded, "failed": 0,
                     "cancelled": 0},
                    "system",
                )  # fmt: skip
                cur.execute(
                    self.delivery_sql,
                    {"job": job_id, "job_state": "succeeded", "allowed": 8, "now": now},
                )
            # Then the money, last (`_settle_and_count`): the settlement, and the release of
            # what is still held when the job ended.
            key = f"settle:attempt:{attempt_id}"
            cost = min(price * runtime // 1000 + 1, held_balance)
            fee = cost * fee_bps // 10000
            payload = {
                "attempt_id": attempt_id, "job_id": job_id, "submitter_id": submitter_id,
                "operator_id": operator_id, "price_per_s_minor": price, "runtime_ms": runtime,
                "timeout_ms": timeout_s * 1000, "charge": True, "node_id": n["id"],
                "billed_ms": runtime, "held_before_minor": held_balance, "cost_minor": cost,
                "charged_minor": cost, "fee_minor": fee, "operator_minor": cost - fee,
                "fee_bps": fee_bps, "book_version": book, "priced_at": leased_at.isoformat(),
                "tier": n["tier"], "region": n["region"], "job_kind": "script",
            }  # fmt: skip
            legs = [(held_id, -cost), (earnings, cost - fee), (revenue, fee)]
            payload["postings"] = [[str(a), m, "CRD"] for a, m in legs]
            # Revenue is not projected: its posting is written, its balance row not touched.
            event = (key, 0, "AttemptSettled", payload, "system:settlement", key)
            _entry_post(cur, event, "settlement", [leg for leg in legs if leg[1]], revenue)
            rest = held_balance - cost
            if done and rest:
                event = (
                    f"hold:job:{job_id}", None, "CreditsReleased",
                    {"job_id": job_id, "submitter_id": submitter_id, "amount_minor": rest,
                     "postings": [[f"job:{job_id}:held", -rest, "CRD"],
                                  [f"user:{submitter_id}:available", rest, "CRD"]]},
                    "system", None,
                )  # fmt: skip
                _entry_post(cur, event, "release", [(held_id, -rest), (available, rest)])
        cur.close()


def raw_ceiling(dsn: str, nodes: list[dict], seconds: float) -> tuple[int, float]:
    workers = [RawAgent(dsn, node) for node in nodes]
    done = [0] * len(workers)
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()

    def loop(i: int) -> None:
        worker = workers[i]
        while time.perf_counter() < deadline:
            lease = worker.claim()
            if lease is None:
                return
            worker.complete(*lease)
            done[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for w in workers:
        w.conn.close()
    return sum(done), elapsed


def in_process(tasks: int) -> None:
    """claim + complete through the services in this process, single-threaded: CPU per task,
    each statement's round trips (Django's execute_wrapper), and a cProfile of the services."""
    import cProfile
    import io
    import pstats
    import re

    from django.db import connection

    from jobs.attempts import attempt_complete
    from jobs.claim import task_claim
    from jobs.node_profile import profile_for
    from nodes.models import Node

    node = Node.objects.filter(state="online").first()
    stats: dict[str, list[float]] = {}

    def timed(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            shape = re.sub(r"\s+", " ", re.sub(r"'[^']*'|\b\d+\b", "?", sql)).strip()[:110]
            stats.setdefault(shape, []).append(time.perf_counter() - t0)

    def cycle() -> None:
        lease = task_claim(profile=profile_for(node))
        attempt_complete(
            attempt_id=lease.attempt_id, token=lease.lease_token, node_id=node.pk, exit_code=0
        )

    for _ in range(20):
        cycle()
    c0, w0 = time.process_time(), time.perf_counter()
    with connection.execute_wrapper(timed):
        for _ in range(tasks):
            cycle()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    count = sum(len(v) for v in stats.values())
    db = sum(sum(v) for v in stats.values())
    print(
        f"\nin process, one thread, {tasks} tasks: {1000 * cpu / tasks:.1f} ms CPU and "
        f"{1000 * wall / tasks:.1f} ms wall per task; {count / tasks:.1f} statements per task "
        f"(BEGIN/COMMIT not counted), {1000 * db / tasks:.1f} ms of them in round trips"
    )
    for shape, times in sorted(stats.items(), key=lambda kv: -sum(kv[1]))[:14]:
        print(f"  {1000 * sum(times) / tasks:6.2f} ms/task {len(times) / tasks:4.1f}×  {shape}")
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(tasks):
        cycle()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(
        r"attempts|claim|billing|settlement|services|registry|reliability|jsonschema/validators"
    )
    print("cProfile (CPU clock) of the same, the project's functions and jsonschema, cumulative:")
    print("\n".join("  " + line for line in text.getvalue().splitlines()[6:40] if line.strip()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--raw-threads", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--worker-class", default="gthread", choices=("gthread", "uvicorn"))
    parser.add_argument("--profile", action="store_true", help="py-spy the workers (next mode)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--in-process",
        type=int,
        default=300,
        help="tasks through the services in process (0: none)",
    )
    args = parser.parse_args()
    common.banner("end-to-end throughput: claim → complete → settle")
    db = common.create_db("throughput")
    common.django_setup(db)
    ops = common.operators(1)
    nodes, keys = common.seed_nodes(max(args.agents, args.raw_threads), operator_ids=ops)
    user_id, _ = common.submitter()
    # Enough for every run at up to ~700 tasks/s, so no run ends on an empty queue.
    per_run = int(args.seconds * 700)
    runs = args.repeats * 3
    t0 = time.perf_counter()
    seed_jobs(per_run * runs, user_id)
    took = time.perf_counter() - t0
    print(f"seeded {per_run * runs} one-slice jobs with held credits in {took:.1f} s")
    # Every node account the settlement credits exists already (as after a node's first task).
    from django.db import transaction

    from jobs import billing
    from jobs.node_profile import profile_for
    from ledger.accounts import REVENUE, account_ensure, earnings_code, system_account
    from ledger.models import AccountKind
    from nodes.models import Node

    with transaction.atomic():
        system_account(REVENUE)
        for op in ops:
            account_ensure(code=earnings_code(op), kind=AccountKind.EARNINGS, owner_id=op)
    sample = Node.objects.get(pk=nodes[0])
    raw_nodes = [
        {
            "id": node_id, "vram": sample.gpu_vram_mb, "cores": sample.cpu_cores,
            "ram": sample.ram_mb, "disk": sample.disk_mb, "gpus": sample.gpu_count,
            "cc": sample.compute_capability, "region": sample.region, "tier": sample.tier,
            "price": billing.node_price(sample).per_s, "operator": sample.operator_id,
            "profile": profile_for(Node.objects.get(pk=node_id)),
        }
        for node_id in nodes[: args.raw_threads]
    ]  # fmt: skip
    common.close_django_connections()
    common.vacuum_analyze(db)
    if args.in_process:
        in_process(args.in_process)
        common.close_django_connections()
    hub = common.Hub(db, workers=args.workers, threads=args.threads, worker_class=args.worker_class)
    print(f"hub: {hub.describe()}; {args.agents} agents; raw ceiling: {args.raw_threads} threads")
    figures: dict[str, list[float]] = {"next": [], "pairs": [], "raw": []}
    cpu: dict[str, list[tuple[float, float]]] = {"next": [], "pairs": []}
    profiles = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    with hub:
        common.run(agents(hub.port, keys[: args.agents], 2, "next"))  # warm up
        for r in range(args.repeats):
            line = []
            for mode in ("next", "pairs"):
                workers = hub.worker_pids()
                h0, p0 = common.cpu_seconds(workers), common.postgres_cpu_seconds(db)
                spies = []
                if args.profile and mode == "next" and r == args.repeats - 1:
                    spies = common.pyspy_start(workers, int(args.seconds), profiles)
                start = time.perf_counter()
                ok, bad = common.run(agents(hub.port, keys[: args.agents], args.seconds, mode))
                elapsed = time.perf_counter() - start
                for spy in spies:
                    spy.wait(timeout=60)
                h1, pg = common.cpu_seconds(workers), common.postgres_cpu_since(db, p0)
                figures[mode].append(ok / elapsed)
                cpu[mode].append((1000 * (h1 - h0) / max(ok, 1), 1000 * pg / max(ok, 1)))
                line.append(f"{mode} {ok / elapsed:.0f}/s ({bad} refused)")
            # The ceiling runs while the hub is up but idle, on the same database.
            done, elapsed = raw_ceiling(common.db_url(db), raw_nodes, args.seconds)
            figures["raw"].append(done / elapsed)
            line.append(f"raw SQL {done / elapsed:.0f}/s")
            print(f"repeat {r + 1}: " + ", ".join(line))
    rows = []
    for mode, label in (
        ("next", "HTTP, complete with want_next (1 request/task)"),
        ("pairs", "HTTP, claim + complete (2 requests/task)"),
        ("raw", "raw SQL through psycopg (same statements)"),
    ):
        ratio = [a / b for a, b in zip(figures[mode], figures["raw"], strict=True)]
        hub_ms = f"{statistics.median(c[0] for c in cpu[mode]):.1f}" if mode in cpu else "-"
        pg_ms = f"{statistics.median(c[1] for c in cpu[mode]):.1f}" if mode in cpu else "-"
        rows.append([label, common.spread(figures[mode]), common.spread(ratio), hub_ms, pg_ms])
    print()
    common.table(
        rows,
        ["path", "tasks/s (target ≥ 200)", "÷ raw SQL", "hub CPU ms/task", "PG CPU ms/task"],
    )
    if args.profile:
        print("\nprofile of the workers, want_next mode (inclusive share of samples):")
        print("\n".join(common.pyspy_summary(profiles, top=60)))
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
