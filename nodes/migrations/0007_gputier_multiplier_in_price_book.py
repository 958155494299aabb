"""GpuTier loses its multiplier: the price book's tier rows (ledger) are the one place a tier's
multiplier lives, versioned with the other rules.

Nothing that priced anything is lost: prices and settlements have always read the book; this
column only ordered a node's GPUs and the wake-ups, which now read the book as well.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("nodes", "0006_ownership_table")]

    operations = [
        migrations.RemoveConstraint(model_name="gputier", name="gputier_multiplier_pos"),
        migrations.RemoveField(model_name="gputier", name="multiplier"),
    ]
