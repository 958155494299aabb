"""Pages at real volume, in this process through Django's test client (the whole middleware,
session and template stack), and the statements each page sends:

- jobs: /jobs/ for a submitter with 100k jobs (COPY-seeded, beside another submitter's);
- network: the public /network/ over 10k nodes in 8 countries and 2 tiers (4 in 5 online),
  16 markets whose prices moved every minute of the last day and every 10 minutes of the six
  before (through the ledger's door), 100k agreed attempts on the nodes of 32 operators, and
  20k jobs finished over the last day.

Target: p99 under 200 ms for every page, with a fixed number of statements whatever the page
holds (no query per row).

    .venv/bin/python -m bench.pages [--only jobs|network] [--jobs 100000] [--nodes 10000]
        [--agreed 100000] [--samples 200]
"""

import argparse
import random
import re
import secrets
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


REGIONS = ("IN", "US", "DE", "GB", "FR", "BR", "JP", "SG")
TIERS = ("rtx-4090", "cpu")


def seed_network(nodes: int, agreed: int) -> None:
    """The network page's world (see the module's docstring)."""
    from django.db import connection
    from django.utils import timezone

    from jobs.models import Attempt, Task

    ops = common.operators(32, prefix="netop")
    markets = [(region, tier) for region in REGIONS for tier in TIERS]
    per = nodes // len(markets)
    node_ids: list[int] = []
    for n, (region, tier) in enumerate(markets):
        for state, count, owner in (
            ("online", per * 4 // 5, n),
            ("offline", per - per * 4 // 5, n + 16),
        ):
            ids, _ = common.seed_nodes(
                count,
                operator_ids=[ops[owner]],
                kind=tier,
                region=region,
                state=state,
                salt=f"{region}{tier}{state}",
            )
            node_ids += ids
    seed_prices(markets)
    submitter_id, _ = common.submitter("net-submitter")
    common.seed_queue(agreed, submitter_id=submitter_id)
    tasks = list(Task.objects.filter(job__submitter_id=submitter_id).values_list("id", flat=True))
    now = timezone.now()
    rng = random.Random(7)

    def attempts() -> Any:
        for task_id in tasks:
            runtime = rng.randint(1_000, 600_000)
            yield {
                "task_id": task_id, "node_id": rng.choice(node_ids), "number": 1,
                "lease_token": secrets.token_hex(16), "state": "succeeded",
                "leased_at": now - timedelta(milliseconds=runtime), "lease_expires_at": now,
                "finished_at": now, "runtime_ms": runtime, "verdict": "agreed", "verdict_at": now,
            }  # fmt: skip

    common.model_copy(Attempt, attempts())
    seed_jobs(submitter_id, 20_000)
    with connection.cursor() as cursor:
        # Finished over the last day, a job every few seconds: today's and yesterday's.
        cursor.execute(
            "UPDATE jobs_job SET finished_at = now() - make_interval(secs => (id % 2880) * 30)"
            " WHERE state IN ('succeeded', 'failed', 'cancelled')"
        )


def seed_prices(markets: list[tuple[str, str]]) -> None:
    """Each market opened through the ledger (spot_bounds_set), then a random walk of
    SpotPriceChanged events through its one door: every minute of the last day, every 10
    minutes of the six before; the spot rows left at the walk's end."""
    from django.db import transaction
    from django.utils import timezone

    from ledger.models import SpotPrice, spot_stream
    from ledger.pricing import spot_bounds_set
    from ledger.services import NewEvent, events_append_bulk

    for region, tier in markets:
        spot_bounds_set(region=region, tier=tier, min_price=1, max_price=10**6, actor="bench")
    rows = {(r.region, r.tier): r for r in SpotPrice.objects.all()}
    price = {m: rows[m].price_per_s_minor for m in markets}
    version = {m: rows[m].version for m in markets}
    now = timezone.now()
    moments = [now - timedelta(days=7) + timedelta(minutes=10 * k) for k in range(6 * 144)]
    moments += [now - timedelta(days=1) + timedelta(minutes=k) for k in range(24 * 60)]
    rng = random.Random(11)
    for at in moments:
        batch = []
        for region, tier in markets:
            old = price[(region, tier)]
            new = max(1, old + rng.choice((-1, 1)) * max(1, old // 20))
            batch.append(
                NewEvent(
                    stream=spot_stream(region, tier), type="SpotPriceChanged", actor="bench",
                    expected_version=version[(region, tier)],
                    payload={
                        "region": region, "tier": tier, "old_price_per_s_minor": old,
                        "price_per_s_minor": new, "min_per_s_minor": 1,
                        "max_per_s_minor": 10**6, "reason": "bench walk",
                    },
                )
            )  # fmt: skip
            price[(region, tier)] = new
            version[(region, tier)] += 1
        with transaction.atomic():
            events_append_bulk(batch, recorded_at=at)
    for (region, tier), row in rows.items():
        SpotPrice.objects.filter(pk=row.pk).update(
            price_per_s_minor=price[(region, tier)], version=version[(region, tier)]
        )
    print(f"{len(moments) * len(markets):,} price moves over 7 days in {len(markets)} markets")


def counted_get(client: Any, path: str) -> tuple[Any, int]:
    """GET `path`; the response and the statements it sent, counted at the cursor (the test
    client's request_started resets Django's query log)."""
    from django.db import connection

    statements: list[str] = []

    def counted(run, sql, *rest):
        statements.append(sql)
        return run(sql, *rest)

    with connection.execute_wrapper(counted):
        response = client.get(path)
    return response, len(statements)


def measure_network(samples: int) -> None:
    from django.conf import settings
    from django.core.cache import cache
    from django.test import Client

    from web.network import LEADERBOARD_KEY

    settings.WEB_NETWORK_PAGE_RATE = (10**9, 60)  # one address asks for every sample
    client = Client()
    rows = []
    for label, cold in (("leaderboard recomputed each time", True), ("leaderboard cached", False)):
        response = client.get("/network/")  # warm: templates, the plans
        assert response.status_code == 200, response.status_code
        if cold:
            cache.delete(LEADERBOARD_KEY)
        response, statements = counted_get(client, "/network/")
        page = response.content.decode()
        online = int(re.search(r'id="nodes-online".*?class="amount">([\d,]+)<', page, re.S)[1])
        times = []
        for _ in range(samples):
            if cold:
                cache.delete(LEADERBOARD_KEY)
            t0 = time.perf_counter()
            client.get("/network/")
            times.append((time.perf_counter() - t0) * 1000)
        rows.append(
            [
                label,
                f"{online:,}",
                page.count('id="prices-'),
                page.count('<td data-label="#">'),
                statements,
                f"{common.pct(times, 50):.1f}",
                f"{common.pct(times, 99):.1f}",
            ]
        )
    common.table(
        rows,
        [
            "/network/",
            "nodes online",
            "tiers",
            "leaders",
            "statements",
            "p50 ms",
            "p99 ms (target < 200)",
        ],
    )
    worst = max(float(r[6]) for r in rows)
    print(f"worst p99: {worst:.1f} ms; {'within' if worst < 200 else 'OVER'} the 200 ms target")


def run_network(args: argparse.Namespace, db: str) -> None:
    common.banner(
        f"the network page: {args.nodes:,} nodes, {args.agreed:,} agreed attempts, 7 days of prices"
    )
    started = time.monotonic()
    seed_network(args.nodes, args.agreed)
    print(f"seeded in {time.monotonic() - started:.1f} s")
    common.vacuum_analyze(db, "nodes_node", "jobs_attempt", "jobs_job", "ledger_event")
    measure_network(args.samples)


def run_jobs(args: argparse.Namespace, db: str) -> None:
    common.banner(f"submitter pages: /jobs/ for a submitter with {args.jobs:,} jobs")
    other_id, _ = common.submitter("other")
    user_id, _ = common.submitter("busy")
    started = time.monotonic()
    seed_jobs(other_id, max(1, args.jobs // 10))
    seed_jobs(user_id, args.jobs)
    print(f"seeded {args.jobs + args.jobs // 10:,} jobs in {time.monotonic() - started:.1f} s")
    common.vacuum_analyze(db, "jobs_job")
    measure(user_id, args.samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("jobs", "network"))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--agreed", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--name", default="pages", help="database suffix")
    args = parser.parse_args()
    # One database for both (Django is set up once a process): the jobs page's submitter is
    # not the network's, so neither page reads the other's rows.
    db = common.create_db(args.name)
    try:
        common.django_setup(db)
        if args.only != "jobs":
            run_network(args, db)
        if args.only != "network":
            run_jobs(args, db)
    finally:
        common.close_django_connections()
        common.drop_db(db)


def measure(user_id: int, samples: int) -> None:
    from django.contrib.auth import get_user_model
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
    for label, path in pages.items():
        response = client.get(path)  # warm: the session, templates, the plan
        assert response.status_code == 200, (path, response.status_code)
        response, statements = counted_get(client, path)
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
                statements,
                f"{common.pct(times, 50):.1f}",
                f"{common.pct(times, 99):.1f}",
            ]
        )
    common.table(rows, ["page", "jobs shown", "statements", "p50 ms", "p99 ms (target < 200)"])
    worst = max(float(r[4]) for r in rows)
    print(f"worst p99: {worst:.1f} ms; {'within' if worst < 200 else 'OVER'} the 200 ms target")


if __name__ == "__main__":
    main()
