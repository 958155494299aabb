"""The claim's plain-body validator against ClaimIn: whatever it accepts, ClaimIn accepts with
the same result; what agents send takes it; anything else is left to ClaimIn."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.claim_body import claim_plain
from jobs.serializers import ClaimIn


def drf(body):
    checked = ClaimIn(data=body)
    return dict(checked.validated_data) if checked.is_valid() else None


waits = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([-1, 0, 1, 29, 30, 31, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.5, -0.0, 0.0, 0.25, 29.999, 30.0, 30.0001, 1e300]),
    st.text(max_size=5),
    st.sampled_from(["1", "2.5", "", " 3 ", "nan"]),
    st.lists(st.integers(), max_size=2),
    st.just({}),
)
bodies = st.one_of(
    st.fixed_dictionaries({}, optional={"wait": waits, "extra": waits}),
    waits,
)


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_whatever_the_plain_path_accepts_claimin_accepts_identically(body):
    plain = claim_plain(body)
    if plain is not None:
        assert drf(body) == plain
        assert type(plain["wait"]) is float and math.isfinite(plain["wait"])


def test_what_agents_send_takes_the_plain_path():
    for body, wait in (({}, 0.0), ({"wait": 0}, 0.0), ({"wait": 25}, 25.0), ({"wait": 2.5}, 2.5)):
        assert claim_plain(body) == drf(body) == {"wait": wait}, body


@pytest.mark.parametrize(
    "body",
    [
        {"wait": "3"},  # DRF coerces it
        {"wait": True},
        {"wait": -1},  # DRF refuses it, with its message
        {"wait": 31},
        {"wait": 10**400},  # no float holds it
        {"wait": None},
        [],
        "wait",
    ],
)
def test_anything_else_is_left_to_claimin(body):
    assert claim_plain(body) is None
