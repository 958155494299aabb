"""What limits the reaper: the row work of 100k node moves and their 100k events, part by part,
in plain SQL on one connection.

The reaper (`bench.fleet --skip-ramp`) moves 100k silent nodes offline, each with its
NodeStateChanged event. This script times the pieces of that work on a database seeded the same
way, each inside a transaction that is rolled back (then VACUUM and CHECKPOINT, so every piece
starts from the same table and pays the same full-page writes), round after round so the
machine's other load falls on every piece alike:

- `reap`: the reaper's own statement (`transition_due_logged`) over all 100k at once;
- `nodes`: the node rows' UPDATE alone (state, state_changed_at, event_version);
- `events`: the 100k events alone, through the ledger's door (`ledger_append`) in one call,
  as the reaper writes them;
- `events, no txid trigger`: the same with the log's txid trigger disabled (what it costs);
- `narrow table`: the nodes' UPDATE on a table of the liveness columns only (id, state,
  deadlines, version): what moving them out of `nodes_node` would leave of `nodes`.

    .venv/bin/python -m bench.reaper_floor [--nodes 100000 --rounds 3]
"""

import argparse
import statistics
import time
from collections.abc import Callable

from bench import common

_LIVE = ("online", "degraded", "draining")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    common.banner("the reaper's floor: its row work, piece by piece, in plain SQL")
    db = common.create_db("reaper_floor")
    common.django_setup(db)

    from django.db import connection, transaction
    from django.utils import timezone

    from nodes.services.cas import transition_due_logged

    ops = common.operators(args.nodes // 1000 + 1, prefix="floorop")
    common.seed_nodes(args.nodes, operator_ids=ops, salt="floor-", deadlines_in_s=-60)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_liveness AS SELECT id, state, state_changed_at, event_version, "
            "degraded_after, offline_after FROM nodes_node"
        )
        cursor.execute("ALTER TABLE bench_liveness ADD PRIMARY KEY (id)")
        # The two deadline indexes the reaper reads, as nodes_node has them.
        cursor.execute(
            "CREATE INDEX ON bench_liveness (offline_after) "
            "WHERE state IN ('online', 'degraded', 'draining')"
        )
        cursor.execute("CREATE INDEX ON bench_liveness (degraded_after) WHERE state = 'online'")
    common.close_django_connections()
    common.vacuum_analyze(db)

    now = timezone.now()
    live = ", ".join(f"'{s}'" for s in _LIVE)
    due = f"state IN ({live}) AND offline_after < %s"
    move = "SET state = 'offline', state_changed_at = %s, event_version = event_version + 1"
    events_sql = (
        "SELECT count(*) FROM (SELECT array_agg('node:' || id ORDER BY id) AS s, "  # noqa: S608
        "array_agg(jsonb_build_object('from', state, 'to', 'offline', 'reason', "
        "'missed_heartbeats') ORDER BY id) AS p, array_agg(event_version ORDER BY id) AS v, "
        f"count(*)::int AS n FROM nodes_node WHERE {due}) src, LATERAL ledger_append(src.s, "
        "array_fill('NodeStateChanged'::text, ARRAY[src.n]), array_fill(1, ARRAY[src.n]), "
        "src.p, array_fill('system:reaper'::text, ARRAY[src.n]), src.v, "
        "array_fill(NULL::text, ARRAY[src.n]), now())"
    )

    def sql(statement: str, params: list) -> Callable[[], int]:
        def run() -> int:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                return cursor.rowcount

        return run

    def without_trigger(run: Callable[[], int]) -> Callable[[], int]:
        def wrapped() -> int:
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE ledger_event DISABLE TRIGGER ledger_event_txid")
            return run()

        return wrapped

    def reap() -> int:
        return len(
            transition_due_logged(
                from_states=_LIVE,
                to_state="offline",
                deadline="offline_after",
                now=now,
                reason="missed_heartbeats",
                actor="system:reaper",
                limit=args.nodes,
            )
        )

    def events() -> int:
        with connection.cursor() as cursor:
            cursor.execute(events_sql, [now])
            return cursor.fetchone()[0]

    pieces: dict[str, Callable[[], int]] = {
        "reap (nodes + events, one transaction)": reap,
        "nodes: UPDATE nodes_node": sql(f"UPDATE nodes_node {move} WHERE {due}", [now, now]),
        "events: INSERT of the reaper's events": events,
        "events, no txid trigger": without_trigger(events),
        "narrow table: UPDATE bench_liveness": sql(
            f"UPDATE bench_liveness {move} WHERE {due}",
            [now, now],
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in pieces}
    for r in range(args.rounds):
        for name, run in pieces.items():
            with connection.cursor() as cursor:
                cursor.execute("CHECKPOINT")
            t0 = time.perf_counter()
            with transaction.atomic():
                rows = run()
                took = time.perf_counter() - t0
                transaction.set_rollback(True)
            if rows != args.nodes:
                raise SystemExit(f"{name}: {rows} rows, expected {args.nodes}")
            times[name].append(took)
            with connection.cursor() as cursor:
                cursor.execute("VACUUM nodes_node")
                cursor.execute("VACUUM bench_liveness")
                cursor.execute("VACUUM ledger_event")
        print(f"  round {r + 1} of {args.rounds} done")
    print(f"\n{args.nodes} nodes, s per piece (median, min–max over {args.rounds} rounds):")
    for name, values in times.items():
        print(f"  {statistics.median(values):6.2f}  ({min(values):.2f}–{max(values):.2f})  {name}")
    common.close_django_connections()
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
