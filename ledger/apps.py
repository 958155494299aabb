from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from core.metrics import register_gauge
        from ledger import events  # noqa: F401 - registers the ledger's event types
        from ledger.books_projection import BooksProjection
        from ledger.metrics import EVENTS_HELP, event_samples
        from ledger.projections import register_projection

        register_projection(BooksProjection())

        from ledger.economy_projection import EconomyProjection

        register_projection(EconomyProjection())
        register_gauge("computepool_events_total", EVENTS_HELP, event_samples)
