"""Regions are countries: ISO 3166-1 alpha-2 codes, the one rule every app checks a region by.

The list is pycountry's (the ISO 3166 tables, kept up to date upstream), so the codes ISO leaves
to users (AA, QM-QZ, XA-XZ, ZZ) and the reserved ones (UK, EU) are refused like any typo. A code
is stored in capitals; a lowercase real code is accepted and capitalised ("in" → "IN"), a
lowercase fake one is refused as its capitals are. Blank means "not said" (a node) or "anywhere"
(a job); whether blank is allowed is the caller's choice.
"""

import pycountry
from django.core.exceptions import ValidationError

COUNTRIES: frozenset[str] = frozenset(country.alpha_2 for country in pycountry.countries)

# The database's share of the rule (a check constraint): the shape only, so a new country in a
# pycountry release needs no migration. The full list is checked on the way in.
CODE_PATTERN = r"^[A-Z]{2}$"


def region_code(value: str) -> str:
    """The country code `value` names, in capitals; blank stays blank. Anything else is a
    ValidationError that says what a region is."""
    # isascii first: str.upper() maps some non-ASCII letters onto ASCII ("ı" → "I").
    code = value.upper() if value.isascii() else value
    if code and code not in COUNTRIES:
        raise ValidationError(
            f"{value!r} is not a country: give an ISO 3166-1 alpha-2 code such as IN, US or DE.",
            code="invalid_region",
        )
    return code


def region_validator(value: str) -> None:
    """For a model field: refuses what `region_code` refuses (blank is the field's business)."""
    region_code(value)
