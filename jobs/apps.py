from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from core.metrics import register_gauge
        from jobs import events, metrics  # noqa: F401 - events registers the event types
        from jobs.leases import leases_extend, leases_reclaim_offline
        from jobs.projection import TasksProjection
        from jobs.wakeup import notify_claims_end
        from ledger.projections import register_projection
        from nodes.hooks import (
            register_claims_end_hook,
            register_heartbeat_hook,
            register_offline_hook,
        )

        register_heartbeat_hook(leases_extend)
        register_offline_hook(leases_reclaim_offline)
        register_claims_end_hook(notify_claims_end)
        register_projection(TasksProjection())
        register_gauge(
            "computepool_tasks",
            "Live tasks by state (queued, leased, running) and size class (kind, cores, RAM).",
            metrics.queue_samples,
        )
        register_gauge(
            "computepool_holds_outstanding",
            "Jobs with work queued or running whose hold still holds credits.",
            metrics.holds_samples,
        )
        register_gauge(
            "computepool_holds_outstanding_minor",
            "Credit minor units those holds still hold.",
            metrics.held_credits_samples,
        )
