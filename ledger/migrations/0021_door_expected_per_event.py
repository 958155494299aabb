"""`ledger_append` takes each event's expected version as the one its stream has before it, and
writes a batch whose events all name one without numbering it (ledger/sql/append.sql)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: the file as it is now.
_APPEND = (Path(__file__).resolve().parent.parent / "sql" / "append.sql").read_text()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0020_event_spot_recent")]

    operations = [migrations.RunSQL(_APPEND, migrations.RunSQL.noop)]
