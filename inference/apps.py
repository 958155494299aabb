from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "inference"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from inference import events, metrics  # noqa: F401 - event types, the relay's metrics
        from inference.projection import RequestsProjection
        from ledger.projections import register_projection

        register_projection(RequestsProjection())
