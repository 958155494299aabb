"""`ledger_post`: a balanced entry's event, entry, postings and balance moves in one call
(ledger/sql/post.sql says what it guarantees)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: a later change to post.sql comes with a migration that runs it again.
_POST = (Path(__file__).resolve().parent.parent / "sql" / "post.sql").read_text()

_DROP = """
DROP FUNCTION IF EXISTS ledger_post(text, text, int, jsonb, text, int, text, timestamptz, text,
                                    bigint[], bigint[], text[], bigint[], bigint[]);
"""


class Migration(migrations.Migration):
    dependencies = [("ledger", "0013_event_door_generic_plan")]

    operations = [migrations.RunSQL(_POST, _DROP)]
