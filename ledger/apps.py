from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from core.metrics import register_gauge
        from ledger import (
            events,  # noqa: F401 - registers the ledger's event types
            metrics,
        )
        from ledger.books_projection import BooksProjection
        from ledger.projections import register_projection

        register_projection(BooksProjection())

        from ledger.economy_projection import EconomyProjection

        register_projection(EconomyProjection())
        register_gauge("computepool_events", metrics.EVENTS_HELP, metrics.event_samples)
        register_gauge(
            "computepool_cashouts_open",
            "Cashouts waiting on finance, by status (requested, approved).",
            metrics.open_cashout_samples,
        )
        register_gauge(
            "computepool_cashouts_open_minor",
            "Credit minor units of the cashouts waiting on finance, by status.",
            metrics.open_cashout_minor_samples,
        )
