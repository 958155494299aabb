"""`commit_lazily`: a statement that is its own transaction commits without waiting for the WAL's
flush (core/sql/commit_lazily.sql says when)."""

from pathlib import Path

from django.db import migrations

# CREATE OR REPLACE: a later change to the file comes with a migration that runs it again.
_SQL = (Path(__file__).resolve().parent.parent / "sql" / "commit_lazily.sql").read_text()


class Migration(migrations.Migration):
    dependencies: list = []

    operations = [
        migrations.RunSQL(_SQL, "DROP FUNCTION IF EXISTS commit_lazily(boolean);"),
    ]
