"""The cost of verification: tasks/s and slices/s of replicated jobs (verification {replicas:
2, quorum: 2}) against the same number of tasks in unreplicated jobs, through the same hub, the
same agents, in the same run.

Each agent (asyncio, keep-alive, loopback) holds the agent key of one node of its own operator
(replicas need distinct operators) and loops claim → complete (want_next) until the queue
is empty. Jobs are submitted through the service (holds, events and all); every result agrees,
so each replicated slice ends with a verdict that pays both replicas. Spot-checks are off: the
nodes are an established, trusted fleet, and the figure is the replication's alone.

    .venv/bin/python -m bench.verification [--agents 16] [--tasks 2000] [--repeats 3]
"""

import argparse
import statistics
import time

from bench import common
from bench.throughput import agents as agent_loops

SLICES_PER_JOB = 100


def submit(submitter_id: int, tasks: int, replicas: int) -> list[int]:
    """Jobs of SLICES_PER_JOB tasks each (replicas × slices), `tasks` in all."""
    from jobs.serializers import JobIn
    from jobs.submission import job_submit

    body = {**common.JOB_BODY, "slices": SLICES_PER_JOB // replicas}
    if replicas > 1:
        body["verification"] = {"replicas": replicas, "quorum": replicas}
    data = JobIn(data=body)
    data.is_valid(raise_exception=True)
    return [
        job_submit(submitter_id=submitter_id, data=data.validated_data).job.pk
        for _ in range(tasks // SLICES_PER_JOB)
    ]


def outcome(job_ids: list[int]) -> tuple[int, int]:
    """(slices that ended succeeded, jobs not succeeded) of these jobs."""
    from jobs.models import Job

    rows = list(Job.objects.filter(pk__in=job_ids).values_list("state", "slices"))
    return sum(s for state, s in rows if state == "succeeded"), sum(
        1 for state, _ in rows if state != "succeeded"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per run (× 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    args.tasks = max(SLICES_PER_JOB, args.tasks // SLICES_PER_JOB * SLICES_PER_JOB)
    common.banner("the cost of verification: replicated (N=2) against unreplicated jobs")
    db = common.create_db("verification")
    common.django_setup(db)
    keys = []
    for i, operator_id in enumerate(common.operators(args.agents)):
        keys += common.seed_nodes(1, operator_ids=[operator_id], kind="cpu", salt=f"v{i}")[1]
    submitter_id, _ = common.submitter()
    hub = common.Hub(
        db, workers=args.workers, threads=args.threads, env={"JOB_SPOTCHECK_MAX_PCT": "0"}
    )
    figures: dict[str, list[tuple[float, float]]] = {"unreplicated": [], "replicated": []}
    try:
        hub.start()
        print(f"hub: {hub.describe()}; {args.agents} agents, one node and operator each")
        for repeat in range(args.repeats):
            for name, replicas in (("unreplicated", 1), ("replicated", 2)):
                jobs = submit(submitter_id, args.tasks, replicas)
                common.close_django_connections()
                start = time.perf_counter()
                done, failed = common.run(agent_loops(hub.port, keys, 600.0, "next"))
                elapsed = time.perf_counter() - start
                slices, unfinished = outcome(jobs)
                print(
                    f"run {repeat + 1} {name:>12}: {done} tasks ({failed} refused) in "
                    f"{elapsed:.2f} s; {slices} slices succeeded, {unfinished} jobs not"
                )
                figures[name].append((done / elapsed, slices / elapsed))
    finally:
        hub.stop()
        common.close_django_connections()
        if not args.keep:
            common.drop_db(db)
    rows = []
    for name, runs in figures.items():
        tasks = [t for t, _ in runs]
        slices = [s for _, s in runs]
        rows.append([name, common.spread(tasks), common.spread(slices)])
    common.table(rows, ["jobs", "tasks/s", "slices/s (results)"])
    plain = statistics.median(t for t, _ in figures["unreplicated"])
    replicated = figures["replicated"]
    ratio_tasks = statistics.median(t for t, _ in replicated) / plain
    ratio_slices = statistics.median(s for _, s in replicated) / plain
    print(f"replicated ÷ unreplicated, tasks/s: {ratio_tasks:.2f}; results/s: {ratio_slices:.2f}")


if __name__ == "__main__":
    main()
