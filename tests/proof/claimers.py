"""The processes of the concurrency proof: claimers (one node each) and a reaper.

Each runs in a forked child of the test process, so it shares the test's settings (its test
database included) and opens its own database connection: real concurrency on PostgreSQL, not
threads taking turns under one interpreter lock. A child reports a Tally on its queue and exits.

Three behaviours, as a fleet has them:
- honest: completes what it claims; now and then fails it (an infrastructure failure, retried
  elsewhere; or the job's own failure, which ends the task), completes twice (the second must
  be fenced), or presents its lease from another node's identity (must be fenced);
- late: leases for LATE_LEASE_S only and sits on every third claim past its expiry, then
  reports it (must be fenced, and the task must be run again elsewhere exactly once);
- the reaper: returns expired leases to the queue, as the beat task does.
"""

import faulthandler
import random
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

LATE_LEASE_S = 2
IDLE_POLL_S = 0.1
REAP_EVERY_S = 0.25
# A child still running this long past the deadline is stuck in one call (each checks the
# deadline between calls): it prints every thread's stack, which the test's report shows.
STUCK_AFTER_S = 15


@dataclass
class Tally:
    name: str
    counts: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


def _unfinished() -> bool:
    from jobs.models import Task

    return Task.objects.filter(state__in=["queued", "leased", "running"]).exists()


def _watch(deadline: float) -> None:
    # sys.stderr may be the test runner's in-memory capture, which has no descriptor.
    faulthandler.dump_traceback_later(
        max(deadline - time.monotonic(), 0) + STUCK_AFTER_S, file=sys.__stderr__
    )


def _tune(settings_overrides: dict[str, Any]) -> None:
    from django.conf import settings

    for name, value in settings_overrides.items():
        setattr(settings, name, value)


def claimer_name(node_id: int, late: bool) -> str:
    return f"{'late' if late else 'honest'}-node-{node_id}"


def claimer(
    *,
    node_id: int,
    other_node_id: int,
    late: bool,
    seed: int,
    deadline: float,
    overrides: dict[str, Any],
    queue,
) -> None:
    from django.db import connection
    from django.utils import timezone

    from jobs.attempts import attempt_complete, attempt_fail
    from jobs.claim import task_claim
    from jobs.errors import StaleLease
    from jobs.node_profile import profile_for
    from nodes.models import Node

    tally = Tally(claimer_name(node_id, late))
    _watch(deadline)
    rng = random.Random(seed)
    _tune({**overrides, **({"JOB_LEASE_S": LATE_LEASE_S} if late else {})})
    held: list[tuple[int, str, datetime]] = []

    def complete(attempt_id: int, token: str, node: int = node_id) -> None:
        attempt_complete(attempt_id=attempt_id, token=token, node_id=node, exit_code=0)

    def fenced(what: str, call) -> None:
        try:
            call()
        except StaleLease:
            tally.counts[what] += 1
        else:
            tally.errors.append(f"{what}: a report that should be fenced went through")

    try:
        while time.monotonic() < deadline:
            now = timezone.now()
            for item in [h for h in held if h[2] < now]:
                held.remove(item)
                fenced("stale_late_report", lambda i=item: complete(i[0], i[1]))
            # Read per claim, as the API does per request: a node put in cool-down or
            # quarantine by its failures claims nothing more.
            lease = task_claim(profile=profile_for(Node.objects.get(pk=node_id)))
            if lease is None:
                if not held and not _unfinished():
                    break
                time.sleep(IDLE_POLL_S)
                continue
            tally.counts["claimed"] += 1
            roll = rng.random()
            token, attempt_id = lease.lease_token, lease.attempt_id
            if late and roll < 1 / 3:
                held.append((attempt_id, token, lease.lease_expires_at))
                tally.counts["held_past_expiry"] += 1
                continue
            try:
                if roll < 0.02:
                    attempt_fail(
                        attempt_id=attempt_id, token=token, node_id=node_id, failure_class="infra"
                    )
                    tally.counts["failed_infra"] += 1
                    continue
                if roll < 0.03:
                    attempt_fail(
                        attempt_id=attempt_id, token=token, node_id=node_id, failure_class="job"
                    )
                    tally.counts["failed_job"] += 1
                    continue
                if roll < 0.05:
                    fenced(
                        "stale_foreign_node",
                        lambda a=attempt_id, t=token: complete(a, t, other_node_id),
                    )
                complete(attempt_id, token)
                tally.counts["completed"] += 1
                if roll > 0.96:
                    fenced("stale_duplicate", lambda a=attempt_id, t=token: complete(a, t))
            except StaleLease:
                # Only a late node's short lease may run out under load before it reports.
                tally.counts["stale_own_report"] += 1
                if not late:
                    tally.errors.append(f"attempt {attempt_id}: honest report fenced")
        else:
            tally.errors.append("deadline passed with work left")
    except Exception:
        tally.errors.append(traceback.format_exc())
    finally:
        connection.close()
        queue.put(tally)


def reaper(*, deadline: float, overrides: dict[str, Any], queue) -> None:
    from django.db import connection

    from jobs.leases import leases_reap

    tally = Tally("reaper")
    _watch(deadline)
    _tune(overrides)
    try:
        while time.monotonic() < deadline:
            tally.counts["reaped"] += leases_reap()
            tally.counts["passes"] += 1
            if not _unfinished():
                break
            time.sleep(REAP_EVERY_S)
    except Exception:
        tally.errors.append(traceback.format_exc())
    finally:
        connection.close()
        queue.put(tally)
