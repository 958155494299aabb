from django.db import migrations

ROLES = ["operator", "submitter", "finance", "admin"]


def create_groups(apps, schema_editor):  # noqa: ANN001
    Group = apps.get_model("auth", "Group")  # noqa: N806
    for role in ROLES:
        Group.objects.get_or_create(name=role)


class Migration(migrations.Migration):
    dependencies = [("people", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
