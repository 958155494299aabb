from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from jobs import events  # noqa: F401 - registers event types
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
