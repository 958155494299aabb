"""Errors in OpenAI's shape for the /v1 routes, so the official clients raise their own
exceptions: {"error": {"message", "type", "param", "code"}}."""

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response

from core.api.exceptions import exception_handler as core_handler

_TYPES = {
    status.HTTP_400_BAD_REQUEST: "invalid_request_error",
    status.HTTP_401_UNAUTHORIZED: "invalid_request_error",
    status.HTTP_403_FORBIDDEN: "invalid_request_error",
    status.HTTP_404_NOT_FOUND: "invalid_request_error",
    status.HTTP_429_TOO_MANY_REQUESTS: "rate_limit_exceeded",
}


def error_type(http_status: int) -> str:
    return _TYPES.get(http_status, "server_error")


def error_body(message: str, http_status: int, *, code: str | None = None,
               param: str | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "error": {
            "message": message,
            "type": error_type(http_status),
            "param": param,
            "code": code,
        }
    }


def openai_error(message: str, http_status: int, *, code: str | None = None,
                 param: str | None = None) -> Response:  # fmt: skip
    return Response(error_body(message, http_status, code=code, param=param), status=http_status)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """The project's handler decides status and text; this only reshapes its answer."""
    response = core_handler(exc, context)
    if response is None:
        return None
    data: Any = response.data if isinstance(response.data, dict) else {}
    fields = data.get("fields") or {}
    param = next(iter(fields), None)
    message = data.get("detail") or "request failed"
    if param:
        message = f"{message} ({param}: {'; '.join(fields[param])})"
    code = data.get("error")
    if response.status_code == 402:  # what OpenAI's clients know a lack of credits by
        code = "insufficient_quota"
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        code = "invalid_api_key"
    shaped = openai_error(str(message), response.status_code, code=code, param=param)
    for header in ("Retry-After", "WWW-Authenticate"):
        if header in response:
            shaped[header] = response[header]
    return shaped
