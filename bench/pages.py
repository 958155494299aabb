"""The submitter's jobs list at real volume: server time to render /jobs/ for a submitter with
100k jobs (COPY-seeded, beside another submitter's), in this process through Django's test
client (the whole middleware, session and template stack), and the statements each page sends.

Target: p99 under 200 ms for every page, with a fixed number of statements whatever the page
holds (no query per row).

    .venv/bin/python -m bench.pages [--jobs 100000] [--samples 200]
"""

import argparse
import time
from datetime import timedelta
from typing import Any

from bench import common

STATES = ("succeeded",) * 90 + ("failed",) * 4 + ("cancelled",) * 3 + ("running", "queued") * 1 + (
    "queued",
)  # fmt: skip


def seed_jobs(submitter_id: int, count: int) -> None:
    """COPY `count` jobs of one submitter, newest last, in a mix of states and sizes, each with
    counters that match its state (the list's progress bars read them)."""
    from django.utils import timezone

    from jobs.models import Job

    start = timezone.now() - timedelta(days=365)
    spec = {
        "image": "computepool/busybox:1", "command": [], "script": "true", "interpreter": "sh",
        "env": {}, "inputs": {},
    }  # fmt: skip

    def rows() -> Any:
        for j in range(count):
            state = STATES[j % len(STATES)]
            slices = 1 + j % 20
            done = {"succeeded": slices, "failed": slices, "cancelled": slices}.get(
                state, j % slices
            )
            yield {
                "submitter_id": submitter_id,
                "name": f"render-{j}",
                "kind": "script",
                "spec": spec,
                "state": state,
                "slices": slices,
                "tasks_succeeded": done if state != "failed" else slices - 1,
                "tasks_failed": 1 if state == "failed" else 0,
                "tasks_cancelled": 0,
                "timeout_s": 600,
                "price_ceiling": 500,
                "max_cost": 500 * 600 * slices,
                "request_fingerprint": "0" * 64,
                "created_at": start + timedelta(seconds=300 * j),
            }

    common.model_copy(Job, rows())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--name", default="pages", help="database suffix")
    args = parser.parse_args()
    common.banner(f"submitter pages: /jobs/ for a submitter with {args.jobs:,} jobs")
    db = common.create_db(args.name)
    try:
        common.django_setup(db)
        other_id, _ = common.submitter("other")
        user_id, _ = common.submitter("busy")
        started = time.monotonic()
        seed_jobs(other_id, max(1, args.jobs // 10))
        seed_jobs(user_id, args.jobs)
        print(f"seeded {args.jobs + args.jobs // 10:,} jobs in {time.monotonic() - started:.1f} s")
        common.vacuum_analyze(db, "jobs_job")
        measure(user_id, args.samples)
    finally:
        common.close_django_connections()
        common.drop_db(db)


def measure(user_id: int, samples: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from jobs.models import Job

    client = Client()
    client.force_login(get_user_model().objects.get(pk=user_id))
    ids = list(Job.objects.filter(submitter_id=user_id).order_by("id").values_list("id", flat=True))
    pages = {
        "first page": "/jobs/",
        "deep page (keyset)": f"/jobs/?before={ids[len(ids) // 2]}",
        "last page": f"/jobs/?before={ids[min(len(ids) - 1, 30)]}",
        "state=failed": "/jobs/?state=failed",
        "state=running": "/jobs/?state=running",
    }
    rows = []
    statements: list[str] = []

    def counted(run, sql, *rest):
        statements.append(sql)
        return run(sql, *rest)

    for label, path in pages.items():
        response = client.get(path)  # warm: the session, templates, the plan
        assert response.status_code == 200, (path, response.status_code)
        statements.clear()
        # Counted at the cursor: the test client's request_started resets Django's query log.
        with connection.execute_wrapper(counted):
            response = client.get(path)
        shown = response.content.count(b"<progress")
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - t0) * 1000)
        rows.append(
            [
                label,
                shown,
                len(statements),
                f"{common.pct(times, 50):.1f}",
                f"{common.pct(times, 99):.1f}",
            ]
        )
    common.table(rows, ["page", "jobs shown", "statements", "p50 ms", "p99 ms (target < 200)"])
    worst = max(float(r[4]) for r in rows)
    print(f"worst p99: {worst:.1f} ms; {'within' if worst < 200 else 'OVER'} the 200 ms target")


if __name__ == "__main__":
    main()
