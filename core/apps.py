from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: the domain error base, the API's plumbing, health and metrics.
    No models; imports no app."""

    name = "core"
    verbose_name = "Core"
