"""Request bodies checked by a serializer made once per process, or by a pydantic model.

DRF deep-copies every declared field of a serializer, nested serializers included, each time one
is made; for the small bodies every agent sends many times a minute (a completion carries a list
of artifacts) that copy costs several times the checking itself. The serializer stays
the one declaration of the body (its checks, its error messages, its OpenAPI schema); only the
instance is kept. `run_validation` keeps no state on the serializer, so one instance serves every
thread. Only for serializers that read no context (no request in them).

A body declared as a pydantic model (the heartbeat's, nodes.heartbeat says why) is checked by
`model_validated`, which answers a bad one as a serializer would: a ValidationError naming each
field the way the API's errors name them ("load.running", "gpus[0].index").
"""

from functools import cache
from typing import Any

import pydantic
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


def _field_name(loc: tuple[int | str, ...]) -> str:
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else part)
    return name or api_settings.NON_FIELD_ERRORS_KEY


def _message(error: Any) -> str:
    if error["type"] == "model_type":  # in DRF's words, not naming the model's class
        return f"Invalid data. Expected a dictionary, but got {type(error['input']).__name__}."
    if error["type"] == "value_error":  # a validator's own words, without pydantic's prefix
        return str(error["ctx"]["error"])
    return error["msg"] + "."


def model_validated(model: type[pydantic.BaseModel], data: Any) -> dict[str, Any]:
    """The body as plain values (the model's fields, defaults filled in), or a ValidationError
    whose detail maps each field's name to its messages."""
    try:
        return model.model_validate(data).model_dump()
    except pydantic.ValidationError as exc:
        detail: dict[str, list[str]] = {}
        for error in exc.errors(include_url=False):
            detail.setdefault(_field_name(error["loc"]), []).append(_message(error))
        raise ValidationError(detail) from None
