from django.urls import path

from webhooks import api

urlpatterns = [
    path("jobs/<int:job_id>/webhook", api.JobWebhookApi.as_view(), name="job-webhook"),
    path(
        "jobs/<int:job_id>/webhook/redeliver",
        api.JobWebhookRedeliverApi.as_view(),
        name="job-webhook-redeliver",
    ),
    path("webhooks/secret", api.SigningSecretApi.as_view(), name="webhook-secret"),
    path(
        "webhooks/secret/rotate",
        api.SigningSecretRotateApi.as_view(),
        name="webhook-secret-rotate",
    ),
]
