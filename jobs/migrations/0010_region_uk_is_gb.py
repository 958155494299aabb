"""A job that asked for region UK asks for GB: nodes 0010 moves the nodes that said UK there, and
a job must keep matching them. A job that asked for another code that is not a country (only
possible while a node had registered with it) keeps it: blanking it would let the job run
anywhere, which its submitter did not ask for. Going back leaves the rows as they are.
"""

from django.db import migrations


def uk_is_gb(apps, schema_editor):  # noqa: ANN001
    for model in ("Job", "Task"):
        apps.get_model("jobs", model).objects.filter(region="UK").update(region="GB")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_task_backoff_due")]

    operations = [migrations.RunPython(uk_is_gb, migrations.RunPython.noop)]
