"""Request bodies checked by a serializer made once per process.

DRF deep-copies every declared field of a serializer, nested serializers included, each time one
is made; for the small bodies every agent sends many times a minute (a heartbeat carries a nested
load and a list of GPUs) that copy costs several times the checking itself. The serializer stays
the one declaration of the body (its checks, its error messages, its OpenAPI schema); only the
instance is kept. `run_validation` keeps no state on the serializer, so one instance serves every
thread. Only for serializers that read no context (no request in them).
"""

from functools import cache
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.settings import api_settings


@cache
def _bound(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    body = serializer_class()
    _ = body.fields  # bound here, once, rather than by the first request (a cached property)
    return body


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The body's validated data, or a ValidationError shaped as `is_valid` shapes it."""
    try:
        return _bound(serializer_class).run_validation(data)
    except ValidationError as exc:
        if isinstance(exc.detail, list):  # the body as a whole is wrong (null, not an object)
            raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: exc.detail}) from None
        raise
