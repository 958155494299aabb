"""The completion's plain-body validator against CompleteIn: whatever it accepts, CompleteIn
accepts with the same result; what agents send takes it; anything else is left to CompleteIn."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.complete_body import complete_plain
from jobs.serializers import CompleteIn

pytestmark = pytest.mark.django_db


def drf(body):
    checked = CompleteIn(data=body)
    if not checked.is_valid():
        return None
    return json.loads(json.dumps(checked.validated_data))


odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([-1025, -1024, -1, 0, 1, 1024, 1025]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.5, -0.0, 0.0, 0.5, 3.0, 1e300, 10**400, -(10**400)]),
    st.text(max_size=5),
    st.sampled_from(["1", "2.5", "true", "", " 3 ", "0"]),
    st.lists(st.integers(), max_size=2),
    st.just({}),
)
tokens = st.one_of(
    st.from_regex(r"[A-Za-z0-9_\-]{1,70}", fullmatch=True),
    st.sampled_from(["", " tok", "tok ", "a\x00b", "t" * 64, "t" * 65, "tök"]),
    odd_scalars,
)
tails = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["", "  ", "ok\n", "a\x00b", "\ud800", " padded ", "x" * 262_144, "x" * 262_145]
    ),
    odd_scalars,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "lease_token": tokens,
        "exit_code": odd_scalars,
        "stdout_tail": tails,
        "stderr_tail": tails,
        "artifacts": st.one_of(
            st.just([]),
            st.lists(st.fixed_dictionaries({"name": st.just("out.txt")}), max_size=1),
            odd_scalars,
        ),
        "reported_runtime_s": odd_scalars,
        "want_next": odd_scalars,
        "extra": odd_scalars,
    },
)


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_whatever_the_plain_path_accepts_completein_accepts_identically(body):
    plain = complete_plain(body)
    if plain is not None:
        assert drf(body) == json.loads(json.dumps(plain))


def test_what_agents_send_takes_the_plain_path():
    token = "Zm9vYmFyLWxlYXNlLXRva2VuLTEyMzQ1Njc4"
    for body in (
        {"lease_token": token},
        {"lease_token": token, "exit_code": 0, "stdout_tail": "ok\n", "want_next": True},
        {"lease_token": token, "stderr_tail": "warn", "reported_runtime_s": 12.5, "artifacts": []},
        {"lease_token": token, "reported_runtime_s": 3, "exit_code": -1024},
    ):
        assert complete_plain(body) is not None, body
        assert drf(body) == json.loads(json.dumps(complete_plain(body)))


@pytest.mark.parametrize(
    "body",
    [
        {"lease_token": " tok"},  # DRF trims it
        {"lease_token": "tok", "exit_code": "3"},  # DRF coerces it
        {"lease_token": "tok", "want_next": "true"},
        {"lease_token": "tok", "stdout_tail": "a\x00b"},
        {"lease_token": "tok", "artifacts": [{"name": "a", "sha256": "0" * 64}]},
        {"lease_token": "tok", "reported_runtime_s": -1},
        {"lease_token": "tok", "reported_runtime_s": 10**400},  # no float holds it
        {"exit_code": 0},
    ],
)
def test_anything_else_is_left_to_completein(body):
    assert complete_plain(body) is None
