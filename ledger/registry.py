"""The registry of event types: each has one JSON schema per schema version.

Apps declare their types in their own events.py (imported from AppConfig.ready), so the ledger
knows every type without importing any app. An unknown type or a payload that does not match
its schema is refused before anything is written.

A type may also declare a `check`: what its schema cannot say, how its fields relate (the
amounts it states are what its postings move). verify_ledger runs it on every logged event
(ledger.payload_checks); the write paths compute those fields together and need not.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator, validators
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


# A payload is stored as JSON, where a tuple is an array like a list; the compiled validator
# takes tuples for arrays too, so the validator of record does, and the two agree.
Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "array", lambda _checker, instance: isinstance(instance, (list, tuple))
    ),
)


@dataclass(frozen=True)
class EventType:
    name: str
    schema_version: int
    schema: dict[str, Any]
    validator: Any = field(compare=False, repr=False)  # a `Validator`
    description: str = ""
    # The same schema compiled to Python code: the common case, a valid payload, at a fraction
    # of jsonschema's cost (every task writes several events). It decides only "valid";
    # anything it refuses goes to `validator`, whose verdict and message stand.
    fast: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    # A schema-valid payload → what in it disagrees with itself, one phrase each (none: []).
    check: Callable[[dict[str, Any]], list[str]] | None = field(
        default=None, compare=False, repr=False
    )


def _draft7(schema: Any) -> Any:
    """The schema in draft 7, which the compiler speaks: a 2020-12 `prefixItems` is draft 7's
    tuple form of `items`, and a 2020-12 `items` beside it is `additionalItems`."""
    if isinstance(schema, list):
        return [_draft7(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _draft7(value) for key, value in schema.items() if key != "prefixItems"}
    if "prefixItems" in schema:
        out["items"] = _draft7(schema["prefixItems"])
        if "items" in schema:
            out["additionalItems"] = _draft7(schema["items"])
    return out


def compile_fast(schema: dict[str, Any]) -> Callable[[Any], Any]:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **_draft7(schema)}
    # Formats are annotations for the validator of record (it has no format checker): so here.
    return fastjsonschema.compile(draft7, use_default=False, use_formats=False)


_REGISTRY: dict[str, EventType] = {}


def register(
    name: str,
    *,
    properties: dict[str, Any],
    required: list[str] | None = None,
    schema_version: int = 1,
    description: str = "",
    additional: bool = False,
    check: Callable[[dict[str, Any]], list[str]] | None = None,
) -> EventType:
    """Declare an event type. Re-registering the same definition is a no-op (reloads)."""
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": additional,
    }
    Draft202012Validator.check_schema(schema)
    event_type = EventType(
        name,
        schema_version,
        schema,
        Validator(schema),
        description,
        compile_fast(schema),
        check,
    )
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
    if event_type.fast is not None:
        try:
            event_type.fast(payload)
            return event_type
        except fastjsonschema.JsonSchemaException:
            pass  # the validator of record decides, and words the refusal
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
