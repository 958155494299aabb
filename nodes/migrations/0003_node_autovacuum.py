"""Every heartbeat rewrites its node's row (the deadlines are indexed, so never a HOT update):
vacuum the table after 2% of it is dead rather than PostgreSQL's default 20%, or the reaper's
and the claim's partial indexes fill with dead entries."""

from django.db import migrations

TABLE = "nodes_node"


def tune(apps, schema_editor):
    schema_editor.execute(
        f"ALTER TABLE {TABLE} SET (autovacuum_vacuum_scale_factor = 0.02, "
        "autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0)"
    )


def untune(apps, schema_editor):
    schema_editor.execute(
        f"ALTER TABLE {TABLE} RESET (autovacuum_vacuum_scale_factor, "
        "autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay)"
    )


class Migration(migrations.Migration):
    dependencies = [("nodes", "0002_seed_gpu_tiers")]

    operations = [migrations.RunPython(tune, untune)]
