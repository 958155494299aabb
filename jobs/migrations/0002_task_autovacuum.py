"""Aggressive autovacuum on the queue's tables (PostgreSQL only).

Every claim and completion rewrites a task row; without frequent vacuum the partial claim index
fills with dead entries and claims slow from thousands to tens per second.
"""

from django.db import migrations

TABLES = ("jobs_task", "jobs_attempt")
SETTINGS = ("autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, "
            "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0")


def forward(apps, schema_editor):  # noqa: ANN001
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} SET ({SETTINGS})")


def backward(apps, schema_editor):  # noqa: ANN001
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(
                f"ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, "
                "autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor, "
                "autovacuum_vacuum_cost_delay)"
            )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
