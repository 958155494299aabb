"""An event gets a fingerprint only when it is written under an idempotency key, the one case
that reads it (ledger/sql/append.sql); the events written before keep theirs."""

from pathlib import Path

from django.db import migrations, models

# CREATE OR REPLACE: the file as it is now.
_APPEND = (Path(__file__).resolve().parent.parent / "sql" / "append.sql").read_text()


class Migration(migrations.Migration):
    dependencies = [("ledger", "0021_door_expected_per_event")]

    operations = [
        # Back past this migration the column stays nullable: the events written meanwhile keep
        # no fingerprint (they are never updated), and the older door writes one for every event.
        migrations.RunSQL(
            "ALTER TABLE ledger_event ALTER COLUMN fingerprint DROP NOT NULL",
            migrations.RunSQL.noop,
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="fingerprint",
                    field=models.CharField(blank=True, max_length=64, null=True),
                )
            ],
        ),
        migrations.RunSQL(_APPEND, migrations.RunSQL.noop),
    ]
