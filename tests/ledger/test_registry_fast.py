"""The compiled event validators against jsonschema's, the validator of record: whatever the
compiled one accepts, jsonschema accepts; the events the hub writes take the compiled path."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import registry

ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([-1, 0, 1, 2, 3]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, -1.0, 2.5]),
    st.text(max_size=6),
    st.sampled_from(["", "abc", "CRD", "INR", "2026-11-22T21:00:00+00:00", "online", "queued"]),
    st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=4),
    st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=4).map(tuple),
    st.just({}),
)


def value_for(schema: dict, draw):
    """A value aimed at `schema`: often valid-looking, often not."""
    if draw(st.booleans()):
        return draw(ODD)
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    kinds = schema.get("type", "string")
    kind = draw(st.sampled_from(kinds if isinstance(kinds, list) else [kinds]))
    if kind == "array":
        prefix = schema.get("prefixItems")
        as_built = draw(st.sampled_from([list, tuple]))  # a tuple is an array too
        if prefix:
            return as_built([value_for(item, draw) for item in prefix][: draw(st.integers(0, 4))])
        items = schema.get("items", {})
        return as_built([value_for(items, draw) for _ in range(draw(st.integers(0, 3)))])
    if kind == "object":
        return payload_for(schema, draw)
    return {
        "integer": lambda: draw(st.integers(min_value=-3, max_value=10**6)),
        "number": lambda: draw(st.one_of(st.integers(-3, 99), st.floats(-3, 99))),
        "string": lambda: draw(st.text(max_size=8)),
        "boolean": lambda: draw(st.booleans()),
        "null": lambda: None,
    }.get(kind, lambda: draw(ODD))()


def payload_for(schema: dict, draw) -> dict:
    payload = {}
    for name, sub in schema.get("properties", {}).items():
        if draw(st.integers(0, 9)):  # now and then a property is missing
            payload[name] = value_for(sub, draw)
    if not draw(st.integers(0, 4)):
        payload[draw(st.sampled_from(["extra", "x"]))] = draw(ODD)
    return payload


@st.composite
def typed_payloads(draw):
    name = draw(st.sampled_from(sorted(registry.all_types())))
    return name, payload_for(registry.get(name).schema, draw)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_payloads())
def test_whatever_the_compiled_validator_accepts_jsonschema_accepts(case):
    name, payload = case
    event_type = registry.get(name)
    try:
        event_type.fast(payload)
    except Exception:  # refused: jsonschema decides, as in registry.validate
        return
    errors = list(event_type.validator.iter_errors(payload))
    assert not errors, (name, payload, [e.message for e in errors])


def test_draft7_translation_keeps_tuple_items():
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}
    assert registry._draft7(schema) == {
        "type": "array",
        "items": [{"type": "string"}],
        "additionalItems": {"type": "integer"},
    }


def test_a_tuple_is_an_array_to_both_validators():
    schema = {"type": "object", "properties": {"legs": registry.POSTINGS}}
    payload = {"legs": (("a", 1, "CRD"), ("b", -1, "CRD"))}
    registry.compile_fast(schema)(payload)
    assert not list(registry.Validator(schema).iter_errors(payload))
