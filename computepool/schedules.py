"""Every periodic task, in one place. `manage.py setup_periodic_tasks` installs them.

Each task is idempotent, so a double fire (two beats by mistake, a retried message) changes
nothing; beat on django-celery-beat's DatabaseScheduler reads these rows.
"""

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Schedule:
    name: str  # the PeriodicTask row's name; also how stale rows are recognised
    task: str  # the Celery task name
    every_s: int | None  # an interval; or None for once a day at `daily_at`
    description: str
    daily_at: tuple[int, int] | None = None  # (hour, minute), UTC


def schedules() -> list[Schedule]:
    return [
        Schedule(
            "ledger: seal the event chain",
            "ledger.seal_chain",
            settings.LEDGER_SEAL_INTERVAL_S,
            "Seal committed events into the hash chain, below the oldest open transaction.",
        ),
        Schedule(
            "nodes: reap silent nodes",
            "nodes.reap",
            settings.NODE_REAPER_INTERVAL_S,
            "Move nodes whose heartbeats stopped to degraded, then offline.",
        ),
        Schedule(
            "nodes: decay reliability",
            "nodes.decay_reliability",
            settings.NODE_RELIABILITY_DECAY_INTERVAL_S,
            "Decay each node's reliability evidence towards the new-node prior.",
        ),
        Schedule(
            "nodes: benchmark hardware",
            "nodes.benchmarks",
            settings.NODE_BENCHMARK_PASS_INTERVAL_S,
            "Expire benchmarks past their deadline; issue them to nodes that are due one.",
        ),
        Schedule(
            "jobs: return expired leases",
            "jobs.reap_leases",
            settings.JOB_REAPER_INTERVAL_S,
            "Requeue tasks whose lease expired (backoff, node excluded) or fail them.",
        ),
        Schedule(
            "jobs: reprice the market",
            "jobs.reprice_market",
            settings.MARKET_REPRICE_INTERVAL_S,
            "Move each (region, tier) spot price one step with supply and demand, within bounds.",
        ),
        Schedule(
            "jobs: delete expired outputs",
            "jobs.expire_artifacts",
            settings.JOB_ARTIFACT_EXPIRY_INTERVAL_S,
            "Delete the stored outputs of jobs whose retention ran out after they ended.",
        ),
        Schedule(
            "webhooks: send what was never sent",
            "webhooks.sweep",
            settings.WEBHOOK_SWEEP_INTERVAL_S,
            "Ask the worker again for completion webhooks due whose message was lost.",
        ),
        Schedule(
            "ledger: verify nightly",
            "ledger.verify",
            None,
            "Replay the log, check the chain and the books (verify_ledger); alert on a failure.",
            daily_at=(settings.LEDGER_VERIFY_HOUR, settings.LEDGER_VERIFY_MINUTE),
        ),
    ]
