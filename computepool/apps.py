from django.apps import AppConfig


class ComputepoolConfig(AppConfig):
    """The wiring: settings, URLs, the Celery app and its schedules. No models, no business
    logic; what the apps share is in core."""

    name = "computepool"
    verbose_name = "ComputePool"
