"""The hub's OpenAPI schema, and a check of one request against it."""

import json
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator


@cache
def generated_schema() -> dict[str, Any]:
    """The schema the hub serves at /api/v1/schema, generated in this process."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(schema))


def operation_for(schema: dict[str, Any], method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The schema's path template that `path` is an instance of, and its operation."""
    for template, operations in schema["paths"].items():
        pattern = re.sub(r"\\\{[^}]+\\\}", r"[^/]+", re.escape(template))
        if re.fullmatch(pattern, path) and method.lower() in operations:
            return template, operations[method.lower()]
    raise AssertionError(f"{method} {path} is no operation of the hub's schema")


def request_problems(schema: dict[str, Any], sent: dict[str, Any]) -> list[str]:
    """What, in one request the client sent (a line of its trace), the schema does not allow:
    an unknown path or method, an undeclared query parameter, a body its schema refuses."""
    _, operation = operation_for(schema, sent["method"], sent["path"])
    declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    problems = [f"query parameter {name!r} not declared" for name in set(sent["query"]) - declared]
    if sent["body"] is not None:
        body_schema = operation["requestBody"]["content"]["application/json"]["schema"]
        validator = Draft202012Validator({**body_schema, "components": schema["components"]})
        problems += [
            f"body: {e.json_path}: {e.message}" for e in validator.iter_errors(sent["body"])
        ]
        # The schema allows fields it does not name (the hub ignores them): the client must not
        # send one, which would be a setting silently lost.
        named = _resolved(schema, body_schema).get("properties", {})
        problems += [
            f"body: field {name!r} not in the schema" for name in set(sent["body"]) - set(named)
        ]
    return problems


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node
