from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: the domain error base, the API's plumbing, the SQL loader (and
    the one SQL function its migration creates), health and metrics. No models; imports no
    app."""

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core.api import schema  # noqa: F401 (registers the OpenAPI extension)
