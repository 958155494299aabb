"""`ledger_fingerprint` writes the text it hashes piece by piece (the same text), and
`ledger_append` numbers a stream's events in a byte-order partition; the fingerprint is STABLE, so
that it is inlined (ledger/sql/append.sql)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: the file as it is now.
_APPEND = (Path(__file__).resolve().parent.parent / "sql" / "append.sql").read_text()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0014_ledger_post")]

    operations = [migrations.RunSQL(_APPEND, migrations.RunSQL.noop)]
