from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webhooks.models import DeliveryAttempt, JobWebhook, SigningSecret, WebhookDelivery


class DeliveryAttemptOut(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = (
            "number",
            "started_at",
            "duration_ms",
            "status_code",
            "succeeded",
            "error",
            "response_excerpt",
        )


class DeliveryOut(serializers.ModelSerializer):
    attempt_log = DeliveryAttemptOut(many=True, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = (
            "id",
            "job_state",
            "state",
            "attempts",
            "attempts_allowed",
            "next_attempt_at",
            "last_status_code",
            "created_at",
            "delivered_at",
            "attempt_log",
        )


class JobWebhookOut(serializers.ModelSerializer):
    job_id = serializers.IntegerField(read_only=True)
    delivery = serializers.SerializerMethodField()

    class Meta:
        model = JobWebhook
        fields = ("job_id", "url", "created_at", "delivery")

    @extend_schema_field(DeliveryOut(allow_null=True))
    def get_delivery(self, webhook: JobWebhook) -> dict | None:
        delivery = getattr(webhook, "delivery", None)
        return DeliveryOut(delivery).data if delivery is not None else None


class SigningSecretOut(serializers.ModelSerializer):
    class Meta:
        model = SigningSecret
        fields = ("secret", "created_at", "rotated_at")
