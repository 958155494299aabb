"""Scale curve: the claim's server time with 1k … 1M queued tasks and 100 … 100k nodes.

Rows are written with COPY (nodes_node, jobs_job, jobs_task), then the claim is timed in this
process, as the hub runs it for one request: the agent-key lookup (people.auth's resolver),
the node's profile and `task_claim`, without HTTP, each statement its own transaction as in
a request (the claim commits by itself without waiting for the WAL's flush, as the hub's
do). The claims commit, so that psycopg prepares the claim and
PostgreSQL runs it under its generic plan, as in production (a claim rolled back clears
psycopg's prepared statements, and each call would be planned for its values); after each
claimant's run the queue is topped up with as many tasks as it took. Three claimants: an RTX
4090 node (16 cores, 64 GB), which can run the task at the head of the queue; a CPU node (8
cores, 16 GB), for which the claim must pass over the GPU tasks that sort ahead of the CPU
tasks; and a small CPU node (2 cores, 2 GB), too small for the tasks of every priority above
0: without the queue's size classes (jobs.size_class) its claim would reject them row by row,
O(queue); with them it reads the head of each of the six classes it fits. The queue: a third
GPU tasks, one job in ten at priority 1-3, 1-4 cores and 0.5-4 GB each.

    .venv/bin/python -m bench.scale [--max-tasks 1000000] [--samples 200]
"""

import argparse
import time

from bench import common

TASK_LEVELS = (1_000, 10_000, 100_000, 1_000_000)
NODE_LEVELS = (100, 10_000, 100_000)


WARM_UP = 20  # claims before the timed ones: psycopg prepares after five, PostgreSQL plans
# the first five prepared executions for their values


def time_claims(key: str, samples: int) -> list[float]:
    """`samples` claims' server times in ms, after WARM_UP untimed; all of them commit."""
    from jobs.claim import task_claim
    from jobs.node_profile import profile_for
    from nodes.auth import resolve_agent_key

    out = []
    for i in range(samples + WARM_UP):
        # Each statement its own transaction, as in a claim request (no caller's transaction:
        # the claim commits by itself, lazily).
        t0 = time.perf_counter()
        _, node = resolve_agent_key(key)
        lease = task_claim(profile=profile_for(node))
        took = time.perf_counter() - t0
        assert lease is not None, "the claimant found nothing to claim"
        if i >= WARM_UP:
            out.append(took * 1000)
    return out


def explain(key: str) -> str:
    """EXPLAIN ANALYZE of the claim under the plan it runs with (its generic plan)."""
    from django.db import transaction

    from bench.claim_plan import claim_generic_plan
    from jobs.node_profile import profile_for
    from nodes.auth import resolve_agent_key

    _, node = resolve_agent_key(key)
    with transaction.atomic():
        plan = claim_generic_plan(profile_for(node), analyze=True)
        transaction.set_rollback(True)
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tasks", type=int, default=1_000_000)
    parser.add_argument("--max-nodes", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    common.banner("scale curve: claim server time (in-process) against queue and fleet size")
    db = common.create_db("scale")
    common.django_setup(db)
    from django.db import connection

    from nodes.models import Node

    ops = common.operators(100, prefix="scaleop")
    user_id, _ = common.submitter(credits_minor=1)
    # The claimants, first in the table; the rest of the fleet is COPY'd around them.
    _, gpu_keys = common.seed_nodes(1, operator_ids=ops, kind="rtx-4090", salt="g")
    _, cpu_keys = common.seed_nodes(1, operator_ids=ops, kind="cpu", salt="c")
    _, small_keys = common.seed_nodes(1, operator_ids=ops, kind="small-cpu", salt="s")
    claimants = (("rtx-4090", gpu_keys[0]), ("cpu", cpu_keys[0]), ("small-cpu", small_keys[0]))
    base = Node.objects.count()
    rows = []
    queued = 0
    plans: dict[str, str] = {}
    for tasks in [t for t in TASK_LEVELS if t <= args.max_tasks]:
        t0 = time.perf_counter()
        common.seed_queue(tasks - queued, submitter_id=user_id, slices_per_job=100)
        queued = tasks
        common.close_django_connections()
        common.vacuum_analyze(db, "jobs_task", "jobs_job")
        print(f"queue at {tasks} tasks (seeded in {time.perf_counter() - t0:.1f} s)")
        fleet = base
        for nodes in [n for n in NODE_LEVELS if n <= args.max_nodes]:
            common.seed_nodes(nodes - fleet, operator_ids=ops, salt=f"f{tasks}-{nodes}")
            fleet = nodes
            common.close_django_connections()
            common.vacuum_analyze(db, "nodes_node")
            for kind, key in claimants:
                ms = time_claims(key, args.samples)
                # Back to the queue's size: as many new tasks as the claims took.
                common.seed_queue(args.samples + WARM_UP, submitter_id=user_id, slices_per_job=100)
                p50, p99 = common.pct(ms, 50), common.pct(ms, 99)
                rows.append([tasks, nodes, kind, f"{p50:.2f}", f"{p99:.2f}", f"{max(ms):.2f}"])
                print(f"  {nodes:>7} nodes, {kind:>8} claimant: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
            if tasks == queued == max(t for t in TASK_LEVELS if t <= args.max_tasks) and (
                nodes == max(n for n in NODE_LEVELS if n <= args.max_nodes)
            ):
                plans = {kind: explain(key) for kind, key in claimants}
        # Back to the claimants alone for the next queue size.
        with connection.cursor() as cursor:
            fleet = "SELECT id FROM nodes_node WHERE name LIKE 'bench-f%%'"
            for table in ("nodes_agentkey", "nodes_ownership"):
                cursor.execute(f"DELETE FROM {table} WHERE node_id IN ({fleet})")  # noqa: S608
            cursor.execute(f"DELETE FROM nodes_node WHERE id IN ({fleet})")  # noqa: S608
        common.close_django_connections()
    print()
    common.table(
        rows,
        ["queued tasks", "nodes", "claimant", "p50 ms", "p99 ms (target ≤ 20)", "max ms"],
    )
    for kind, _ in claimants:
        small = next(r for r in rows if r[2] == kind)
        large = [r for r in rows if r[2] == kind][-1]
        print(
            f"  {kind}: p99 at the largest size ÷ p99 at the smallest = "
            f"{float(large[4]) / float(small[4]):.1f} (target ≤ 2)"
        )
    for kind, plan in plans.items():
        print(
            f"\nEXPLAIN (ANALYZE, BUFFERS) of the claim under its generic plan, {kind} claimant, "
            "largest size:"
        )
        print(plan)
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
