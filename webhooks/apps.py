from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from jobs.hooks import register_finished_hook, register_submitted_hook
        from webhooks.services import delivery_open, webhook_attach

        register_submitted_hook(webhook_attach)
        register_finished_hook(delivery_open)
