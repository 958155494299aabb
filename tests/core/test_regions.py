"""The one rule for a region (core.regions): a real country's ISO 3166-1 alpha-2 code."""

import pytest
from django.core.exceptions import ValidationError

from core.regions import COUNTRIES, region_code


@pytest.mark.parametrize(
    ("given", "code"), [("IN", "IN"), ("in", "IN"), ("gb", "GB"), ("De", "DE"), ("", "")]
)
def test_it_capitalises_a_real_country_code(given, code):
    assert region_code(given) == code


@pytest.mark.parametrize(
    "given",
    [
        "xx", "XX", "zz", "ZZ", "AA", "QM", "qz", "XA", "XK",  # assigned to users, not countries
        "UK", "EU", "uk", "eu",  # reserved by ISO, not assigned
        "IND", "I", " IN", "I1", "ın",  # the wrong length or alphabet ("ı".upper() is "I")
    ],
)  # fmt: skip
def test_it_refuses_what_is_not_a_country(given):
    with pytest.raises(ValidationError, match="ISO 3166-1 alpha-2") as refused:
        region_code(given)
    assert refused.value.code == "invalid_region"


def test_the_list_is_the_iso_list():
    assert len(COUNTRIES) == 249 and {"IN", "US", "GB", "DE", "SS", "BQ"} <= COUNTRIES
