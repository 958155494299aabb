"""The OpenAI-compatible routes under /v1 (authenticated with a submitter's key), and the
agents' side of inference under /api/v1/agent (an agent key)."""

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsSubmitter
from inference import catalog, openai_errors
from inference.files import model_file_response
from inference.models import InferenceModel
from nodes.auth import IsAgent


class OpenAiView(APIView):
    """Answers errors in OpenAI's shape."""

    permission_classes = [IsSubmitter]

    def get_exception_handler(self):
        return openai_errors.exception_handler


class ModelsApi(OpenAiView):
    @extend_schema(responses={200: dict}, summary="Models the pool can serve now (OpenAI's list)")
    def get(self, request: Request) -> Response:
        data = [
            {
                "id": model.name,
                "object": "model",
                "created": int(model.created_at.timestamp()),
                "owned_by": "computepool",
                "context_length": model.context_length,
                "quantization": model.quantization,
            }
            for model in catalog.servable_models()
        ]
        return Response({"object": "list", "data": data})


class AgentModelFileApi(APIView):
    """A catalog model's GGUF file, for an agent whose node can hold the model."""

    permission_classes = [IsAgent]

    @extend_schema(
        responses={
            (200, "application/octet-stream"): bytes,
            (206, "application/octet-stream"): bytes,
        },
        summary="Download a model's file (Range for resuming; X-Model-Sha256 to check it)",
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        model = InferenceModel.objects.filter(name=name, enabled=True).first()
        if model is None:
            raise NotFound(f"no model {name!r} in the catalog")
        if not catalog.capable_nodes(model).filter(pk=request.auth.pk).exists():
            raise PermissionDenied(f"this node cannot hold model {name!r} now")
        return model_file_response(model, request.headers.get("Range"))
