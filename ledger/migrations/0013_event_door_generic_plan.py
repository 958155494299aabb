"""`ledger_append` with one generic plan for every call, and its INSERT without a CTE
(ledger/sql/append.sql)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: the file as it is now.
_APPEND = (Path(__file__).resolve().parent.parent / "sql" / "append.sql").read_text()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0012_event_door")]

    operations = [migrations.RunSQL(_APPEND, migrations.RunSQL.noop)]
