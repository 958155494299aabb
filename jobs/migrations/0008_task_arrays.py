"""A task's tier allow-list and its excluded nodes become PostgreSQL arrays (they were delimited
text matched with LIKE): the values are converted in place."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models

TO_ARRAYS = """
ALTER TABLE jobs_task
    ALTER COLUMN tier_allow DROP DEFAULT,
    ALTER COLUMN tier_allow TYPE varchar(32)[]
        USING COALESCE(string_to_array(NULLIF(btrim(tier_allow, ','), ''), ','), '{}'),
    ALTER COLUMN tier_allow SET DEFAULT '{}',
    ALTER COLUMN excluded_nodes DROP DEFAULT,
    ALTER COLUMN excluded_nodes TYPE bigint[]
        USING COALESCE(string_to_array(NULLIF(btrim(excluded_nodes, ','), ''), ',')::bigint[],
                       '{}'),
    ALTER COLUMN excluded_nodes SET DEFAULT '{}';
"""
TO_TEXT = """
ALTER TABLE jobs_task
    ALTER COLUMN tier_allow DROP DEFAULT,
    ALTER COLUMN tier_allow TYPE varchar(500)
        USING CASE WHEN tier_allow = '{}' THEN '' ELSE ',' || array_to_string(tier_allow, ',') || ',' END,
    ALTER COLUMN excluded_nodes DROP DEFAULT,
    ALTER COLUMN excluded_nodes TYPE text
        USING ',' || array_to_string(excluded_nodes, ',') || CASE WHEN excluded_nodes = '{}' THEN '' ELSE ',' END,
    ALTER COLUMN excluded_nodes SET DEFAULT ',';
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0007_task_size_class_on_insert")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(TO_ARRAYS, TO_TEXT)],
            state_operations=[
                migrations.AlterField(
                    model_name="task",
                    name="tier_allow",
                    field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=32),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="excluded_nodes",
                    field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="task",
            index=django.contrib.postgres.indexes.GinIndex(
                condition=models.Q(("state", "queued"), models.Q(("tier_allow", []), _negated=True)),
                fields=["tier_allow"],
                name="task_tier_allow",
            ),
        ),
    ]
