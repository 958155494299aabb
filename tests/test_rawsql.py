"""`insert_select_lists`: defaults written once into the text, and nothing left to chance."""

import pytest

from computepool.rawsql import insert_select_lists
from jobs.models import Attempt

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

EXPRS = {"task_id": "src.id", "number": "1", "leased_at": "now()", "price_per_s": "0"}


def test_unset_columns_take_their_defaults_as_literals_and_given_ones_are_parameters():
    columns, select, params = insert_select_lists(
        Attempt,
        name="a",
        exprs=EXPRS,
        values={"node_id": 7, "lease_token": "t", "lease_expires_at": None},
    )
    by_column = dict(zip(columns.split(", "), select.split(", "), strict=True))
    assert by_column['"state"'] == "'leased'" and by_column['"progress"'] == "0"
    assert by_column['"finished_at"'] == "NULL" and by_column['"cancel_requested"'] == "false"
    assert by_column['"detail"'] == "''" and by_column['"task_id"'] == "src.id"
    assert by_column['"node_id"'] == "%(a_node_id)s"
    assert params == {"a_node_id": 7, "a_lease_token": "t", "a_lease_expires_at": None}


def test_a_column_whose_default_is_not_one_value_must_be_given():
    with pytest.raises(ValueError, match="lease_token has no fixed default"):
        insert_select_lists(
            Attempt, name="b", exprs=EXPRS, values={"node_id": 7, "lease_expires_at": None}
        )


def test_an_unknown_column_is_refused():
    with pytest.raises(ValueError, match="no column nodes"):
        insert_select_lists(Attempt, name="c", exprs={**EXPRS, "nodes": "1"}, values={})
