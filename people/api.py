from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsPerson, acting_roles
from people.models import ApiKey
from people.roles import user_roles
from people.serializers import ApiKeyCreated, ApiKeyIn, ApiKeyOut, MeOut
from people.services import api_key_create, api_key_revoke


class MeApi(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=MeOut, summary="Who am I, and which roles this credential acts as")
    def get(self, request: Request) -> Response:
        user = request.user
        return Response(
            MeOut(
                {
                    "id": user.pk,
                    "username": user.get_username(),
                    "roles": sorted(user_roles(user)),
                    "acting_as": sorted(acting_roles(request)),
                }
            ).data
        )


class ApiKeyListCreateApi(generics.ListAPIView):
    """Your own API keys. Creating one returns its secret once."""

    permission_classes = [IsPerson]
    serializer_class = ApiKeyOut

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return ApiKey.objects.none()
        return ApiKey.objects.filter(user=self.request.user)

    @extend_schema(request=ApiKeyIn, responses={201: ApiKeyCreated}, summary="Issue an API key")
    def post(self, request: Request) -> Response:
        data = ApiKeyIn(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = api_key_create(
            user=request.user,
            role=data.validated_data["role"],
            name=data.validated_data["name"],
            actor=f"user:{request.user.pk}",
        )
        return Response(
            ApiKeyCreated({"key": key, "secret": secret}).data, status=status.HTTP_201_CREATED
        )


class ApiKeyRevokeApi(APIView):
    permission_classes = [IsPerson]

    @extend_schema(request=None, responses=ApiKeyOut, summary="Revoke one of your API keys")
    def post(self, request: Request, key_id: int) -> Response:
        key = generics.get_object_or_404(ApiKey, pk=key_id, user=request.user)
        key = api_key_revoke(key=key, actor=f"user:{request.user.pk}")
        return Response(ApiKeyOut(key).data)
