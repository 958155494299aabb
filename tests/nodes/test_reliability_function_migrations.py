"""Migrations nodes 0008 and 0009 create the reliability's SQL functions (the decay's one rule,
and an outcome recorded), and drop them when they are reversed."""

import pytest
from django.db import connection

from tests.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

DECAY = "node_evidence_decayed(float8, float8, timestamptz, timestamptz, float8)"
OUTCOME = "node_outcome_record(bigint, boolean, timestamptz, float8, float8, float8)"


def _defined(signature: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure(%s) IS NOT NULL", [signature])
        return cursor.fetchone()[0]


@pytest.mark.parametrize(
    ("before", "gone", "kept"),
    [
        ("0008_reliability_decay_function", [OUTCOME], [DECAY]),
        ("0007_gputier_multiplier_in_price_book", [OUTCOME, DECAY], []),
    ],
)
def test_the_functions_go_and_come_back(before, gone, kept):
    assert all(_defined(f) for f in [*gone, *kept])
    with migrated_back_to([("nodes", before)]):
        assert not any(_defined(f) for f in gone)
        assert all(_defined(f) for f in kept)
    assert all(_defined(f) for f in [*gone, *kept])
