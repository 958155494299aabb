"""`ledger_post` keeps one generic plan, as `ledger_append` does, and neither ever plans a
whole-table scan (ledger/sql/append.sql and post.sql say why)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: the files as they are now.
_SQL = Path(__file__).resolve().parent.parent / "sql"
_APPEND = (_SQL / "append.sql").read_text()
_POST = (_SQL / "post.sql").read_text()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0015_fingerprint_spelled_out")]

    operations = [
        migrations.RunSQL(_APPEND, migrations.RunSQL.noop),
        migrations.RunSQL(_POST, migrations.RunSQL.noop),
    ]
