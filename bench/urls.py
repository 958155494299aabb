"""The hub's URLs plus /bench/ref: the reference every hot-path figure is divided by.

The reference is what every agent request pays anyway and nothing more: the DRF stack, the
agent-key authentication (one indexed lookup), the per-key throttle, a validated JSON body,
one database transaction with one UPDATE, and a JSON response.
"""

from django.db import connection, transaction
from django.urls import include, path
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from nodes.auth import IsAgent


class RefIn(serializers.Serializer):
    status = serializers.CharField(max_length=32, default="available")


class ReferenceApi(APIView):
    permission_classes = [IsAgent]

    def post(self, request: Request) -> Response:
        data = RefIn(data=request.data)
        data.is_valid(raise_exception=True)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE nodes_node SET last_heartbeat_at = %s WHERE id = %s",
                [timezone.now(), request.auth.pk],
            )
        return Response({"status": data.validated_data["status"]})


urlpatterns = [
    path("bench/ref", ReferenceApi.as_view(), name="bench-ref"),
    path("", include("computepool.urls")),
]
