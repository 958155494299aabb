"""One shape for every API error: {"error": code, "detail": text, "fields": {field: [msgs]}}.

Application errors (a conflict, a stale lease, insufficient funds) are raised as DomainError
subclasses (core.errors) from services and mapped here, so views stay thin.
"""

from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError


def _fields(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for name, value in detail.items():
            if isinstance(value, dict):
                for sub, msgs in _fields(value).items():
                    out[f"{name}.{sub}"] = msgs
            elif isinstance(value, list):
                flat: list[str] = []
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        for sub, msgs in _fields(item).items():
                            out[f"{name}[{i}].{sub}"] = msgs
                    else:
                        flat.append(str(item))
                if flat:
                    out[name] = flat
            else:
                out[name] = [str(value)]
        return out
    return {}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, DomainError):
        return Response(
            {"error": exc.code, "detail": str(exc), "fields": getattr(exc, "fields", {})},
            status=exc.http_status,
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {
                "error": "request_too_large",
                "detail": "The request body is too large.",
                "fields": {},
            },
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(exc.detail) if isinstance(exc.detail, dict) else {}
        detail = "Invalid input." if fields else "; ".join(str(d) for d in exc.detail)
        non_field = fields.pop("non_field_errors", None)
        if non_field:
            detail = "; ".join(non_field)
        response.data = {"error": "invalid", "detail": detail, "fields": fields}
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
        response.data = {"error": code, "detail": str(exc.detail), "fields": {}}
    if response.status_code == status.HTTP_429_TOO_MANY_REQUESTS:
        response.data["error"] = "throttled"
    return response
