"""An event assembled by PostgreSQL inside a statement is the row `event_append` would write."""

import pytest
from django.db import connection, transaction
from django.utils import timezone

from ledger.errors import InvalidEvent
from ledger.event_sql import COLUMNS, TABLE, SqlInt, event_sql
from ledger.models import Event
from ledger.services import _fingerprint, event_append

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# JobFinished's schema: integers and a free string, the shapes a statement's payload mixes.
TYPE = "JobFinished"


def body(job_id, succeeded, state):
    return {"job_id": job_id, "state": state, "succeeded": succeeded, "failed": 0, "cancelled": 2}


def write(payload, *, ids=(41, 7), version="1"):
    built = event_sql(
        name="ev",
        type=TYPE,
        stream_prefix="job:",
        stream_id="src.id",
        version=version,
        payload=payload,
        actor="system",
        recorded_at=timezone.now(),
    )
    sql = (
        f"WITH src AS (SELECT %(id)s::bigint AS id, %(m)s::bigint AS m) "
        f"INSERT INTO {TABLE} ({COLUMNS}) SELECT {built.select} FROM src RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {**built.params, "id": ids[0], "m": ids[1]})
        return Event.objects.get(pk=cursor.fetchone()[0])


@pytest.mark.parametrize(
    "text",
    ["plain", 'quotes " and \\ backslash', "100 % sure, 'single'", "ünïcødé ✓ 東京", "7318000000"],
)
def test_the_statement_writes_the_payload_and_fingerprint_python_would(text):
    event = write(body(SqlInt("src.id"), SqlInt("src.m * 3"), text))
    payload = body(41, 21, text)
    assert event.stream == "job:41" and event.version == 1
    assert event.payload == payload
    assert event.fingerprint == _fingerprint("job:41", TYPE, payload)
    assert event.schema_version == 1 and event.actor == "system" and event.txid is not None


def test_it_matches_an_event_appended_by_python():
    with transaction.atomic():
        twin = event_append(stream="job:5", type=TYPE, actor="system", payload=body(5, 9, "x"))
    event = write(body(SqlInt("src.id"), SqlInt("src.m"), "x"), ids=(5, 9), version="2")
    assert (event.stream, event.payload, event.fingerprint) == (
        twin.stream,
        twin.payload,
        twin.fingerprint,
    )


def test_a_payload_that_breaks_its_schema_is_refused_before_any_sql():
    with pytest.raises(InvalidEvent):
        write(body(SqlInt("src.id"), SqlInt("src.m"), 3))
    without_state = body(SqlInt("src.id"), SqlInt("src.m"), "x")
    del without_state["state"]
    with pytest.raises(InvalidEvent):
        write(without_state)
