"""core.api.bodies: a body checked by the one serializer instance a process keeps gives what a
fresh serializer's is_valid gives, valid or not, from any number of threads."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from rest_framework.exceptions import ValidationError

from core.api.bodies import validated
from jobs.serializers import CompleteIn
from nodes.serializers import CapabilitiesIn

BODIES = [
    (CapabilitiesIn, {"ram_mb": 1024}),
    (CapabilitiesIn, {"gpus": [{"index": 0, "vram_total_mb": 8000}], "sandboxes": ["docker"]}),
    (CapabilitiesIn, {"gpus": [{"index": -1}, {"vram_total_mb": "lots"}], "ram_mb": -5}),
    (CapabilitiesIn, {"cpu": [1, 2]}),
    (CapabilitiesIn, None),
    (CapabilitiesIn, [1, 2, 3]),
    (CompleteIn, {"lease_token": "t", "artifacts": [{"name": "a", "sha256": "x"}]}),
    (CompleteIn, {"lease_token": "t", "exit_code": 3, "want_next": True}),
]


def _fresh(serializer_class, data):
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return ("valid", serializer.validated_data)
    return ("invalid", serializer.errors)


def _kept(serializer_class, data):
    try:
        return ("valid", validated(serializer_class, data))
    except ValidationError as exc:
        return ("invalid", exc.detail)


@pytest.mark.parametrize(("serializer_class", "data"), BODIES)
def test_the_kept_serializer_answers_as_a_fresh_one(serializer_class, data):
    kept, fresh = _kept(serializer_class, data), _fresh(serializer_class, data)
    assert kept[0] == fresh[0]
    if kept[0] == "invalid":
        assert set(kept[1]) == set(fresh[1])  # the same fields are named
        if "non_field_errors" not in fresh[1]:
            assert kept[1] == fresh[1]  # with the same messages
    else:
        assert kept[1] == fresh[1]


def test_defaults_are_not_shared_between_bodies():
    first = validated(CapabilitiesIn, {})
    first["sandboxes"].append("changed")
    assert validated(CapabilitiesIn, {})["sandboxes"] == []


def test_threads_each_get_their_own_answer():
    def check(i):
        body = {"gpus": [{"index": i % 200}], "sandboxes": [f"s{i}"]}
        got = validated(CapabilitiesIn, body)
        return got["gpus"][0]["index"] == i % 200 and got["sandboxes"] == [f"s{i}"]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(check, range(2000)))
