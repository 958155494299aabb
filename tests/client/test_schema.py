"""Every call the client makes, and every shape it reads, against the schema the hub generates:
a route, parameter or field renamed on one side fails here."""

from typing import get_type_hints

import pytest

from tests.client.schema import generated_schema


@pytest.fixture
def schema(client_src_on_path) -> dict:
    return generated_schema()


def test_every_operation_is_in_the_schema_with_its_method_and_id(schema):
    from computepool_client.operations import OPERATIONS

    for op in OPERATIONS:
        assert op.path in schema["paths"], op
        operation = schema["paths"][op.path].get(op.method.lower())
        assert operation is not None, f"{op.method} {op.path} is not in the schema"
        assert operation["operationId"] == op.operation_id
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert set(op.query) <= declared, (op.operation_id, set(op.query) - declared)
        # Every path parameter the template names is one the schema declares.
        in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert {part[1:-1] for part in op.path.split("/") if part.startswith("{")} == in_path


def test_every_shape_has_the_fields_of_its_schema_component(schema):
    from computepool_client.models import SCHEMAS

    components = schema["components"]["schemas"]
    for component, shape in SCHEMAS.items():
        properties = set(components[component]["properties"])
        assert set(get_type_hints(shape)) == properties, component


def test_the_quote_has_the_fields_the_hub_serializes(client_src_on_path):
    from computepool_client.models import JobQuote

    from ledger.serializers import JobQuoteOut

    assert set(get_type_hints(JobQuote)) == set(JobQuoteOut().fields)


def test_the_submission_sends_the_idempotency_header_the_schema_names(schema):
    from computepool_client.operations import JOB_SUBMIT

    operation = schema["paths"][JOB_SUBMIT.path]["post"]
    headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
    assert "Idempotency-Key" in headers


def test_the_request_check_names_what_the_schema_does_not_allow(schema):
    from tests.client.schema import request_problems

    good = {
        "method": "POST",
        "path": "/api/v1/jobs/",
        "query": {},
        "body": {"kind": "script", "script": "echo", "price_ceiling": 1, "slices": 2},
    }
    assert request_problems(schema, good) == []
    bad_body = {**good, "body": {**good["body"], "slices": "two", "timeout": 5}}
    assert sorted(request_problems(schema, bad_body)) == [
        "body: $.slices: 'two' is not of type 'integer'",
        "body: field 'timeout' not in the schema",
    ]
    logs = {"method": "GET", "path": "/api/v1/jobs/7/logs", "query": {"since": "3"}, "body": None}
    assert request_problems(schema, logs) == ["query parameter 'since' not declared"]
    with pytest.raises(AssertionError, match="no operation"):
        request_problems(schema, {**logs, "method": "DELETE"})
