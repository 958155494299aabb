"""A node's region is a real country (core.regions): the rows registered before are made so.

Registration used to take any two letters. A node that said UK is in GB (pricing already read UK
as GB); any other code that is not a country (XX, ZZ, EU, …) is blanked, as if the operator had
not said, which prices the node at the book's default region multiplier. The NodeRegistered
events keep what was sent. Then a check constraint keeps the column to the code's shape, and
registration and the admin check the list. Going back leaves the rows as they are.
"""

from django.db import migrations, models
from django.db.models import Q

import core.regions
from core.regions import COUNTRIES


def regions_made_countries(apps, schema_editor):  # noqa: ANN001
    Node = apps.get_model("nodes", "Node")
    Node.objects.filter(region="UK").update(region="GB")
    Node.objects.exclude(region="").exclude(region__in=COUNTRIES).update(region="")


class Migration(migrations.Migration):
    dependencies = [("nodes", "0009_outcome_record_function")]

    operations = [
        migrations.RunPython(regions_made_countries, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="node",
            name="region",
            field=models.CharField(
                blank=True,
                help_text="ISO 3166-1 alpha-2 (core.regions), or blank",
                max_length=2,
                validators=[core.regions.region_validator],
            ),
        ),
        migrations.AddConstraint(
            model_name="node",
            constraint=models.CheckConstraint(
                condition=Q(region="") | Q(region__regex="^[A-Z]{2}$"), name="node_region_code"
            ),
        ),
    ]
