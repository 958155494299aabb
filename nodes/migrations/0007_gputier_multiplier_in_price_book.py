"""GpuTier loses its multiplier: the price book's tier rules (ledger.PriceRule) are the one place
a tier's multiplier lives, versioned with the other rules.

Nothing that priced anything is lost: prices and settlements have always read the book; this
column only ordered a node's GPUs and the wake-ups, which now read the book as well. Going back
fills the column again from the book in force (1.0 for a tier it does not name).
"""

from decimal import Decimal

from django.db import migrations, models
from django.utils import timezone


def multipliers_from_book(apps, schema_editor):  # noqa: ANN001
    PriceBook = apps.get_model("ledger", "PriceBook")
    PriceRule = apps.get_model("ledger", "PriceRule")
    GpuTier = apps.get_model("nodes", "GpuTier")
    book = (
        PriceBook.objects.filter(effective_from__lte=timezone.now())
        .order_by("-effective_from")
        .first()
    )
    rules = PriceRule.objects.filter(book=book, kind="tier") if book else PriceRule.objects.none()
    in_force = dict(rules.values_list("key", "value"))
    for tier in GpuTier.objects.all():
        tier.multiplier = in_force.get(tier.slug, Decimal("1.0"))
        tier.save(update_fields=["multiplier"])


class Migration(migrations.Migration):
    dependencies = [("nodes", "0006_ownership_table"), ("ledger", "0011_price_rules")]

    operations = [
        # Backwards: the column comes back nullable, is filled from the book, then required.
        migrations.AlterField(
            model_name="gputier",
            name="multiplier",
            field=models.DecimalField(decimal_places=2, max_digits=5, null=True),
        ),
        migrations.RunPython(migrations.RunPython.noop, multipliers_from_book),
        migrations.RemoveConstraint(model_name="gputier", name="gputier_multiplier_pos"),
        migrations.RemoveField(model_name="gputier", name="multiplier"),
    ]
