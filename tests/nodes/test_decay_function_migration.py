"""Migration nodes 0008 creates the reliability decay's SQL function, and drops it when it is
reversed."""

import pytest
from django.db import connection

from tests.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("nodes", "0007_gputier_multiplier_in_price_book")]
SIGNATURE = "node_evidence_decayed(float8, float8, timestamptz, timestamptz, float8)"


def _defined() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure(%s) IS NOT NULL", [SIGNATURE])
        return cursor.fetchone()[0]


def test_the_function_goes_and_comes_back():
    assert _defined()
    with migrated_back_to(BEFORE):
        assert not _defined()
    assert _defined()
