from django.apps import AppConfig


class ComputepoolConfig(AppConfig):
    """The wiring: schedules, metrics, health. No models, no business logic."""

    name = "computepool"
    verbose_name = "ComputePool"
