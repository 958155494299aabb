"""The event log's one door: the `ledger_append` and `ledger_fingerprint` functions
(ledger/sql/append.sql says what they guarantee)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: a later change to append.sql comes with a migration that runs it again.
_APPEND = (Path(__file__).resolve().parent.parent / "sql" / "append.sql").read_text()

_DROP = """
DROP FUNCTION IF EXISTS ledger_append(text[], text[], int[], jsonb[], text[], int[], text[],
                                      timestamptz);
DROP FUNCTION IF EXISTS ledger_fingerprint(text, text, jsonb);
"""


class Migration(migrations.Migration):
    dependencies = [("ledger", "0011_price_rules")]

    operations = [migrations.RunSQL(_APPEND, _DROP)]
