"""The heartbeat's body (nodes.heartbeat, a pydantic model) is checked as the API's serializers
check theirs: the same coercions and refusals, and errors named as the API names fields
(core.api.bodies.model_validated)."""

import pytest
from rest_framework.exceptions import ValidationError

from core.api.bodies import model_validated
from nodes.heartbeat import Heartbeat


def errors(data) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        model_validated(Heartbeat, data)
    return caught.value.detail


def test_an_idle_beat_gets_every_field_with_its_default():
    assert model_validated(Heartbeat, {"status": "available"}) == {
        "status": "available",
        "load": {
            "cpu_pct": None,
            "mem_pct": None,
            "running": None,
            "slots": None,
            "models_loaded": [],
            "inference_running": None,
        },
        "gpus": [],
        "leases": [],
        "capabilities": None,
        "region": None,
    }


def test_numbers_may_come_as_numeric_strings_and_text_is_trimmed():
    body = model_validated(
        Heartbeat,
        {
            "status": "busy",
            "load": {"cpu_pct": "3.5", "running": "2"},
            "gpus": [{"index": 0, "throttled": "true", "vram_free_mb": 24000.0}],
            "leases": ["  tok-1 "],
            "node_id": 7,  # unknown keys are dropped, as a serializer drops them
        },
    )
    assert body["load"]["cpu_pct"] == 3.5 and body["load"]["running"] == 2
    assert body["gpus"] == [
        {
            "index": 0,
            "utilization_pct": None,
            "temperature_c": None,
            "power_w": None,
            "vram_free_mb": 24000,
            "throttled": True,
        }
    ]
    assert body["leases"] == ["tok-1"]
    assert "node_id" not in body


def test_each_bad_field_is_named_as_the_api_names_it():
    got = errors(
        {
            "status": "sleeping",
            "load": {"running": -1, "mem_pct": "lots"},
            "gpus": [{"index": -1}, {"power_w": 1.5}, {"vram_free_mb": 2.5}],
            "leases": ["", "x" * 129],
        }
    )
    assert set(got) == {
        "status",
        "load.running",
        "load.mem_pct",
        "gpus[0].index",
        "gpus[2].vram_free_mb",
        "leases[0]",
        "leases[1]",
    }
    assert got["load.running"] == ["Input should be greater than or equal to 0."]
    assert all(isinstance(m, str) and m for messages in got.values() for m in messages)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_not_a_number_and_infinities_are_refused(value):
    assert set(errors({"status": "available", "load": {"cpu_pct": value}})) == {"load.cpu_pct"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "status"),
        ({"status": "available", "load": None}, "load"),
        ({"status": "available", "gpus": [{}] * 17}, "gpus"),
        ({"status": "available", "leases": ["t"] * 257}, "leases"),
        ({"status": "available", "leases": "tok"}, "leases"),
        ({"status": "available", "load": {"models_loaded": ["m"] * 33}}, "load.models_loaded"),
        ({"status": "available", "capabilities": "many"}, "capabilities"),
    ],
)
def test_missing_null_and_oversized_fields_are_refused(body, field):
    assert field in errors(body)


@pytest.mark.parametrize("data", [None, [1, 2, 3], "available", 7])
def test_a_body_that_is_not_an_object_is_refused_as_a_whole(data):
    got = errors(data)
    assert list(got) == ["non_field_errors"]
    assert got["non_field_errors"][0].startswith("Invalid data. Expected a dictionary, but got")


def test_a_region_is_a_country_code_in_capitals():
    assert model_validated(Heartbeat, {"status": "available", "region": "de"})["region"] == "DE"
    assert model_validated(Heartbeat, {"status": "available", "region": ""})["region"] == ""
    got = errors({"status": "available", "region": "Atlantis"})
    assert got["region"] == [
        "'Atlantis' is not a country: give an ISO 3166-1 alpha-2 code such as IN, US or DE."
    ]


def test_defaults_are_not_shared_between_bodies():
    first = model_validated(Heartbeat, {"status": "available"})
    first["leases"].append("changed")
    first["load"]["models_loaded"].append("changed")
    second = model_validated(Heartbeat, {"status": "available"})
    assert second["leases"] == [] and second["load"]["models_loaded"] == []


def test_a_nested_part_that_is_not_an_object_is_named_in_drfs_words():
    got = errors({"status": "available", "load": [1, 2], "gpus": ["warm"]})
    assert got["load"] == ["Invalid data. Expected a dictionary, but got list."]
    assert got["gpus[0]"] == ["Invalid data. Expected a dictionary, but got str."]
