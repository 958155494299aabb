"""A body declared as a pydantic model (the heartbeat's) appears in the API's OpenAPI 3.0 schema
in 3.0's words (core.api.schema): the whole schema stays valid, null is `nullable`."""

import json

from drf_spectacular.validation import validate_schema
from jsonschema import Draft202012Validator

from tests.client.schema import generated_schema


def _component(schema, name):
    return schema["components"]["schemas"][name]


def test_the_schema_is_valid_openapi_3_0():
    schema = generated_schema()
    assert schema["openapi"].startswith("3.0")
    validate_schema(schema)  # raises on anything 3.0 does not allow, such as type 'null'
    assert '"null"' not in json.dumps(schema)


def test_the_heartbeat_is_documented_as_its_model_checks_it():
    schema = generated_schema()
    body = _component(schema, "HeartbeatRequest")
    assert body["required"] == ["status"]
    gpu = _component(schema, "HeartbeatGpu")["properties"]["index"]
    assert (gpu["type"], gpu["minimum"], gpu["maximum"], gpu["nullable"]) == (
        "integer",
        0,
        255,
        True,
    )
    leases = body["properties"]["leases"]
    assert (leases["maxItems"], leases["items"]["maxLength"]) == (256, 128)


def test_an_agents_heartbeat_fits_the_schema_and_a_bad_one_does_not():
    schema = generated_schema()
    # JSON Schema's validator, which knows no `nullable`: the bodies below carry no null.
    validator = Draft202012Validator(
        {"$ref": "#/components/schemas/HeartbeatRequest", "components": schema["components"]}
    )
    good = {
        "status": "busy",
        "load": {"cpu_pct": 3.5, "running": 1, "models_loaded": ["tiny"]},
        "gpus": [{"index": 0, "throttled": False, "vram_free_mb": 24000}],
        "leases": ["tok"],
        "region": "DE",
    }
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({"status": "sleeping", "gpus": [{"index": 256}]}))
