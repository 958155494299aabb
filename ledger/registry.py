"""The registry of event types: each has one JSON schema per schema version.

Apps declare their types in their own events.py (imported from AppConfig.ready), so the ledger
knows every type without importing any app. An unknown type or a payload that does not match
its schema is refused before anything is written.
"""

from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from ledger.errors import InvalidEvent

# Reusable fragments for schemas.
INT = {"type": "integer"}
POSITIVE_INT = {"type": "integer", "minimum": 1}
NON_NEGATIVE_INT = {"type": "integer", "minimum": 0}
STR = {"type": "string"}
NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}
POSTINGS = {
    "type": "array",
    "minItems": 2,
    "items": {
        "type": "array",
        "prefixItems": [
            STR,
            {"type": "integer"},
            {"type": "string", "minLength": 3, "maxLength": 3},
        ],
        "minItems": 3,
        "maxItems": 3,
    },
}


@dataclass(frozen=True)
class EventType:
    name: str
    schema_version: int
    schema: dict[str, Any]
    validator: Draft202012Validator = field(compare=False, repr=False)
    description: str = ""


_REGISTRY: dict[str, EventType] = {}


def register(
    name: str,
    *,
    properties: dict[str, Any],
    required: list[str] | None = None,
    schema_version: int = 1,
    description: str = "",
    additional: bool = False,
) -> EventType:
    """Declare an event type. Re-registering the same definition is a no-op (reloads)."""
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": additional,
    }
    Draft202012Validator.check_schema(schema)
    event_type = EventType(name, schema_version, schema, Draft202012Validator(schema), description)
    existing = _REGISTRY.get(name)
    if existing is not None and existing != event_type:
        raise ValueError(f"event type {name} is already registered with another schema")
    _REGISTRY[name] = event_type
    return event_type


def get(name: str) -> EventType:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidEvent(f"unknown event type {name!r}") from None


def validate(name: str, payload: dict[str, Any]) -> EventType:
    event_type = get(name)
    try:
        event_type.validator.validate(payload)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "payload"
        raise InvalidEvent(
            f"{name} payload is invalid at {where}: {exc.message}", fields={where: [exc.message]}
        ) from None
    return event_type


def all_types() -> dict[str, EventType]:
    return dict(_REGISTRY)
