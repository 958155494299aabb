"""HTTP for webhooks: a submitter sees the webhooks of their own jobs and their own secret."""

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsSubmitter
from webhooks.models import DeliveryAttempt, JobWebhook
from webhooks.serializers import DeliveryOut, JobWebhookOut, SigningSecretOut
from webhooks.services import delivery_redeliver
from webhooks.signing import secret_ensure, secret_rotate


def _own_webhook(request: Request, job_id: int) -> JobWebhook:
    """The caller's job's webhook; someone else's job, or one without a webhook, is 404."""
    return generics.get_object_or_404(
        JobWebhook.objects.select_related("delivery").prefetch_related(
            Prefetch("delivery__attempt_log", queryset=DeliveryAttempt.objects.order_by("number"))
        ),
        job_id=job_id,
        job__submitter=request.user,
    )


class JobWebhookApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(responses=JobWebhookOut, summary="A job's webhook, its delivery and attempts")
    def get(self, request: Request, job_id: int) -> Response:
        return Response(JobWebhookOut(_own_webhook(request, job_id)).data)


class JobWebhookRedeliverApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(
        request=None,
        responses={202: DeliveryOut},
        summary="Send an ended job's webhook again (409 while it runs or is being sent)",
    )
    def post(self, request: Request, job_id: int) -> Response:
        webhook = _own_webhook(request, job_id)
        delivery = delivery_redeliver(job_id=webhook.job_id)
        return Response(DeliveryOut(delivery).data, status=status.HTTP_202_ACCEPTED)


class SigningSecretApi(APIView):
    """Your webhook signing secret (made on first use): every webhook of your jobs is signed
    with it."""

    permission_classes = [IsSubmitter]

    @extend_schema(responses=SigningSecretOut, summary="Your webhook signing secret")
    def get(self, request: Request) -> Response:
        return Response(SigningSecretOut(secret_ensure(user_id=request.user.pk)).data)


class SigningSecretRotateApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(
        request=None,
        responses=SigningSecretOut,
        summary="A new signing secret; the old one also signs for a day",
    )
    def post(self, request: Request) -> Response:
        return Response(SigningSecretOut(secret_rotate(user_id=request.user.pk)).data)
