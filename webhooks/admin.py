from django.contrib import admin
from django.http import HttpRequest

from core.admin import NoEditAdmin, act_on_each
from webhooks.models import DeliveryAttempt, JobWebhook, SigningSecret, WebhookDelivery
from webhooks.services import delivery_redeliver


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    fields = ("number", "started_at", "duration_ms", "status_code", "error", "response_excerpt")
    readonly_fields = fields
    can_delete = False
    max_num = 0


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(NoEditAdmin):
    """Deliveries change only through their service (attempts, redelivery); the admin shows
    them with every attempt."""

    list_display = (
        "id",
        "webhook",
        "job_state",
        "state",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("state", "job_state")
    readonly_fields = ("webhook", "body")
    inlines = [DeliveryAttemptInline]
    actions = ["redeliver"]
    show_full_result_count = False

    @admin.action(description="Send the selected deliveries again")
    def redeliver(self, request: HttpRequest, queryset) -> None:
        act_on_each(
            request,
            queryset,
            lambda delivery: delivery_redeliver(job_id=delivery.webhook_id),
            "Asked again for {n} delivery(ies).",
        )


@admin.register(JobWebhook)
class JobWebhookAdmin(NoEditAdmin):
    list_display = ("job", "url", "created_at")
    search_fields = ("url",)
    show_full_result_count = False


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(NoEditAdmin):
    list_display = ("id", "delivery", "number", "started_at", "duration_ms", "status_code", "error")
    list_filter = ("status_code",)
    show_full_result_count = False


@admin.register(SigningSecret)
class SigningSecretAdmin(NoEditAdmin):
    """Who has a secret and when it last changed; the secret itself is its owner's to see."""

    list_display = ("user", "created_at", "rotated_at")
    fields = ("user", "created_at", "rotated_at")
    readonly_fields = fields
