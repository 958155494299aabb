"""Dispatch latency: idle agents wait on long-poll claims (`wait=`); a submitter posts one-slice
jobs over HTTP; the figure is the time from the POST /api/v1/jobs/ response arriving to the
claim response (carrying that job's task) arriving at an agent. Both ends are in this process
on one clock. An agent that gets a task completes it and waits again.

Then the requeue phase: the first agent to claim each of `--requeues` jobs drops it (as a
SIGKILLed agent would), its lease is ended and the reaper (`leases_reap`, in this process, as
beat runs it) requeues the task with a `--backoff` of seconds; the figures are from the requeue
and from the backoff's end (the task's `available_at`, on this machine's clock) to the claim
response arriving at another agent, still long-polling.

    .venv/bin/python -m bench.dispatch [--agents 16] [--jobs 300] [--interval 0.2] [--threads 32]
        [--requeues 20] [--backoff 1]
"""

import argparse
import asyncio
import os
import random
import time

from bench import common

STALL_S = 10.0


async def run(port: int, keys: list[str], sub_key: str, jobs: int, interval: float, wait: float):
    submitted: dict[int, tuple[float, float]] = {}
    claimed: dict[int, float] = {}
    stop = asyncio.Event()
    empty_polls = [0]
    stalled = [False]

    async def agent(key: str) -> None:
        conn = common.Conn(port, key)
        while not stop.is_set():
            status, body = await conn.request("POST", "/api/v1/agent/claim", {"wait": wait})
            if status == 204:
                empty_polls[0] += 1
                continue
            arrived = time.perf_counter()
            if status != 200:
                await asyncio.sleep(0.1)
                continue
            claimed[body["spec"]["job_id"]] = arrived
            await conn.request(
                "POST",
                f"/api/v1/agent/attempts/{body['attempt_id']}/complete",
                {"lease_token": body["lease_token"], "exit_code": 0},
            )
        await conn.close()

    async def submitter() -> None:
        conn = common.Conn(port, sub_key)
        await asyncio.sleep(1.0)  # every agent is waiting
        for _ in range(jobs):
            t0 = time.perf_counter()
            try:
                status, body = await asyncio.wait_for(
                    conn.request("POST", "/api/v1/jobs/", common.JOB_BODY), STALL_S
                )
            except TimeoutError:
                # Queued behind long polls that hold every thread of the worker that owns this
                # connection: report it rather than wait out every poll.
                stalled[0] = True
                break
            t1 = time.perf_counter()
            if status == 201:
                submitted[body["id"]] = (t0, t1)
            await asyncio.sleep(random.expovariate(1 / interval))
        deadline = time.perf_counter() + 10
        while len(claimed) < len(submitted) and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await conn.close()

    tasks = [asyncio.create_task(agent(k)) for k in keys]
    await submitter()
    # Agents leave after their current long poll; bound it anyway.
    await asyncio.wait(tasks, timeout=wait + 5)
    for t in tasks:
        t.cancel()
    return submitted, claimed, empty_polls[0], stalled[0]


def _lose_and_reap(attempt_id: int) -> tuple[float, float]:
    """End the dropped attempt's lease and run the reaper: (when it returned, when the task's
    backoff ends), as Unix times."""
    from django.db import connection
    from django.utils import timezone

    from jobs.leases import leases_reap
    from jobs.models import Attempt, Task

    try:
        Attempt.objects.filter(pk=attempt_id).update(lease_expires_at=timezone.now())
        assert leases_reap() == 1
        requeued = time.time()
        due = Task.objects.get(attempt_set=attempt_id).available_at
        return requeued, due.timestamp()
    finally:
        connection.close()


async def run_requeues(port: int, keys: list[str], sub_key: str, count: int, wait: float):
    """Per job: (requeued, backoff ends, claimed again) as Unix times."""
    dropped: asyncio.Queue[int] = asyncio.Queue()
    seen: set[int] = set()
    reclaimed: dict[int, float] = {}
    stop = asyncio.Event()

    async def agent(key: str) -> None:
        conn = common.Conn(port, key)
        while not stop.is_set():
            status, body = await conn.request("POST", "/api/v1/agent/claim", {"wait": wait})
            if status != 200:
                if status != 204:
                    await asyncio.sleep(0.1)
                continue
            arrived = time.time()
            job_id = body["spec"]["job_id"]
            if job_id not in seen:  # killed mid-job: no report, no heartbeat
                seen.add(job_id)
                dropped.put_nowait(body["attempt_id"])
                continue
            reclaimed[job_id] = arrived
            await conn.request(
                "POST",
                f"/api/v1/agent/attempts/{body['attempt_id']}/complete",
                {"lease_token": body["lease_token"], "exit_code": 0},
            )
        await conn.close()

    async def requeuer() -> dict[int, tuple[float, float, float]]:
        conn = common.Conn(port, sub_key)
        figures = {}
        await asyncio.sleep(1.0)  # every agent is waiting
        for _ in range(count):
            status, body = await conn.request("POST", "/api/v1/jobs/", common.JOB_BODY)
            assert status == 201, body
            attempt_id = await asyncio.wait_for(dropped.get(), STALL_S)
            requeued, due = await asyncio.to_thread(_lose_and_reap, attempt_id)
            deadline = time.time() + (due - requeued) + wait + STALL_S
            while body["id"] not in reclaimed and time.time() < deadline:
                await asyncio.sleep(0.01)
            if body["id"] in reclaimed:
                figures[body["id"]] = (requeued, due, reclaimed[body["id"]])
        stop.set()
        await conn.close()
        return figures

    tasks = [asyncio.create_task(agent(k)) for k in keys]
    figures = await requeuer()
    await asyncio.wait(tasks, timeout=wait + 5)
    for t in tasks:
        t.cancel()
    return figures


def _requeue_table(figures: dict[int, tuple[float, float, float]], count: int, backoff: float):
    after_due = [1000 * (claimed - due) for _, due, claimed in figures.values()]
    after_requeue = [1000 * (claimed - requeued) for requeued, _, claimed in figures.values()]
    rows = [
        ["backoff ends → claim response", after_due],
        ["requeue → claim response", after_requeue],
    ]
    common.table(
        [
            [
                label,
                f"{common.pct(values, 50):.1f}",
                f"{common.pct(values, 99):.1f}",
                f"{max(values, default=float('nan')):.1f}",
            ]
            for label, values in rows
        ],
        [f"requeue with a {backoff:g} s backoff, ms", "p50", "p99", "max"],
    )
    print(f"  {len(figures)} of {count} requeued tasks claimed again")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.2, help="mean s between submits")
    parser.add_argument("--wait", type=float, default=20.0, help="the claims' wait=")
    parser.add_argument("--workers", type=int, default=4)
    # Each waiting claim holds a thread; with 8 threads a worker that accepted 8 of the agents'
    # connections serves nothing else until a poll ends (see docs/benchmarks.md).
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--requeues", type=int, default=20, help="lost leases requeued")
    parser.add_argument("--backoff", type=int, default=1, help="the requeue's backoff, s")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    common.banner("dispatch latency: submit → claimed, with agents long-polling")
    # The reaper runs in this process: its backoff is this process's setting.
    os.environ["JOB_RETRY_BACKOFF_S"] = str(args.backoff)
    db = common.create_db("dispatch")
    common.django_setup(db)
    ops = common.operators(1)
    _, keys = common.seed_nodes(args.agents, operator_ids=ops)
    _, sub_key = common.submitter()
    common.close_django_connections()
    hub = common.Hub(db, workers=args.workers, threads=args.threads)
    print(
        f"hub: {hub.describe()}; {args.agents} agents (rtx-4090: no fit delay) long-polling "
        f"with wait={args.wait:g}; {args.jobs} one-slice jobs, one every ~{args.interval:g} s"
    )
    with hub:
        workers = hub.worker_pids()
        h0, p0 = common.cpu_seconds(workers), common.postgres_cpu_seconds(db)
        start = time.perf_counter()
        submitted, claimed, empty, stalled = common.run(
            run(hub.port, keys, sub_key, args.jobs, args.interval, args.wait)
        )
        elapsed = time.perf_counter() - start
        h1, pg = common.cpu_seconds(workers), common.postgres_cpu_since(db, p0)
        requeues = (
            common.run(run_requeues(hub.port, keys, sub_key, args.requeues, args.wait))
            if args.requeues
            else {}
        )
    if stalled:
        print(
            f"STALLED: a POST /api/v1/jobs/ waited more than {STALL_S:g} s (queued behind long "
            f"polls holding every thread of a worker); figures are of the jobs before it"
        )
    after_response = [1000 * (claimed[j] - t1) for j, (_, t1) in submitted.items() if j in claimed]
    after_request = [1000 * (claimed[j] - t0) for j, (t0, _) in submitted.items() if j in claimed]
    lost = len(submitted) - len(after_response)
    print()
    common.table(
        [
            [
                "POST response → claim response",
                f"{common.pct(after_response, 50):.1f}",
                f"{common.pct(after_response, 99):.1f}",
                f"{max(after_response, default=float('nan')):.1f}",
                f"{sum(1 for v in after_response if v < 0)}",
            ],
            [
                "POST sent → claim response",
                f"{common.pct(after_request, 50):.1f}",
                f"{common.pct(after_request, 99):.1f}",
                f"{max(after_request, default=float('nan')):.1f}",
                "-",
            ],
        ],
        [
            "dispatch latency, ms",
            "p50 (≤ 100)",
            "p99 (≤ 1000)",
            "max",
            "claim before POST returned",
        ],
    )
    print(
        f"  {len(after_response)} of {len(submitted)} submissions claimed "
        f"({lost} not within 10 s); "
        f"{empty} long polls ended empty; run {elapsed:.0f} s; hub CPU {h1 - h0:.1f} s, "
        f"PostgreSQL CPU {pg:.1f} s"
    )
    if args.requeues:
        print()
        _requeue_table(requeues, args.requeues, args.backoff)
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
