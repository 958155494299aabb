"""A body declared as a pydantic model (nodes.heartbeat) in the API's OpenAPI 3.0 schema
(imported from CoreConfig.ready).

drf-spectacular's own extension for pydantic writes what pydantic generates, JSON Schema 2020-12,
where a value that may be null is `anyOf: [..., {type: 'null'}]`: OpenAPI 3.0, which the rest of
the schema speaks, has no type 'null' and says `nullable: true`. This one generates the same
schema in 3.0's words, and as the model checks a request (its validation mode) for a request.
"""

from typing import Any

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.plumbing import ResolvedComponent
from pydantic.json_schema import GenerateJsonSchema, model_json_schema


class _OpenApi30(GenerateJsonSchema):
    def nullable_schema(self, schema: Any) -> dict[str, Any]:
        inner = self.generate_inner(schema["schema"])
        if "$ref" in inner:  # 3.0 ignores whatever sits beside a $ref
            return {"allOf": [inner], "nullable": True}
        return {**inner, "nullable": True}


class PydanticBody(PydanticExtension):
    priority = 1  # ahead of drf-spectacular's, which matches the same models

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = model_json_schema(
            self.target,
            ref_template="#/components/schemas/{model}",
            mode="validation" if direction == "request" else "serialization",
            schema_generator=_OpenApi30,
        )
        for name, sub_schema in schema.pop("$defs", {}).items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=name, type=ResolvedComponent.SCHEMA, object=name, schema=sub_schema
                )
            )
        return schema
