"""The OpenAI-compatible routes under /v1 (authenticated with a submitter's key)."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsSubmitter
from inference import catalog, openai_errors


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
