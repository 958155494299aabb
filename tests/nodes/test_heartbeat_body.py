"""The heartbeat's plain-body validator against HeartbeatIn: whatever it accepts, HeartbeatIn
accepts with the same result; what agents send takes it; anything else is left to HeartbeatIn."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.common import HEARTBEAT_BODY
from nodes.heartbeat_body import heartbeat_plain
from nodes.serializers import HeartbeatIn

pytestmark = pytest.mark.django_db


def drf(body):
    checked = HeartbeatIn(data=body)
    if not checked.is_valid():
        return None
    return json.loads(json.dumps(checked.validated_data))


BOUNDS = [-101, -100, -1, 0, 1, 100, 255, 256, 1000, 1001, 10_000, 10_001, 100_000, 100_001,
          2**31 - 1, 2**31]  # fmt: skip
# Values near and past every bound, of every JSON type, and the types DRF would coerce.
odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from(BOUNDS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-100.5, -0.0, 0.5, 99.9, 1000.0, 1000.5, 100_000.0, 3.0]),
    st.text(max_size=5),
    st.sampled_from(["1", "2.5", "true", "", " 3 "]),
    st.lists(st.integers(), max_size=2),
)
load_keys = ["cpu_pct", "mem_pct", "running", "slots", "other"]
gpu_keys = ["index", "utilization_pct", "temperature_c", "power_w", "vram_free_mb", "throttled",
            "name"]  # fmt: skip
records = lambda keys: st.one_of(  # noqa: E731
    st.dictionaries(st.sampled_from(keys), odd_scalars, max_size=len(keys)), odd_scalars
)
tokens = st.one_of(
    st.from_regex(r"[A-Za-z0-9_\-]{1,130}", fullmatch=True),
    st.text(max_size=6),
    st.sampled_from(["", " tok", "tok ", "a\x00b", "t" * 128, "t" * 129]),
    st.integers(),
    st.none(),
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "status": st.one_of(
            st.sampled_from(["available", "busy", "degraded", "draining", "online", "", 1]),
            odd_scalars,
        ),
        "load": records(load_keys),
        "gpus": st.one_of(st.lists(records(gpu_keys), max_size=18), odd_scalars),
        "leases": st.one_of(st.lists(tokens, max_size=4), odd_scalars),
        "capabilities": st.one_of(st.none(), st.just({}), odd_scalars),
        "extra": odd_scalars,
    },
)


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_whatever_the_plain_path_accepts_heartbeatin_accepts_identically(body):
    plain = heartbeat_plain(body)
    if plain is not None:
        assert drf(body) == json.loads(json.dumps(plain))


def test_what_agents_send_takes_the_plain_path():
    full = {**HEARTBEAT_BODY, "leases": ["Zm9vYmFyLWxlYXNlLXRva2VuLTEyMzQ1Njc4"]}
    for body in (HEARTBEAT_BODY, full, {"status": "busy"}, {"status": "draining", "load": {}}):
        assert heartbeat_plain(body) is not None, body
        assert drf(body) == json.loads(json.dumps(heartbeat_plain(body)))


@pytest.mark.parametrize(
    "body",
    [
        {"status": "available", "capabilities": {"cpu": {"cores": 4}}},  # HeartbeatIn's to judge
        {"status": "available", "load": {"cpu_pct": "3.5"}},  # DRF coerces; so let it
        {"status": "available", "gpus": [{"throttled": "true"}]},
        {"status": "nonsense"},
        {"status": "available", "leases": ["x" * 129]},
        {"status": "available", "load": {"running": -1}},
        [],
    ],
)
def test_anything_else_is_left_to_heartbeatin(body):
    assert heartbeat_plain(body) is None
