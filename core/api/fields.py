"""Serializer fields for rules every app shares."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from core.regions import region_code

REGION_HELP = "ISO 3166-1 alpha-2 country code (IN, US, GB, DE …); lowercase is capitalised"


class RegionField(serializers.CharField):
    """A region (core.regions): a real country's code, returned in capitals."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", REGION_HELP)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return region_code(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages, code="invalid_region") from None
