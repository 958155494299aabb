"""A task's size class is set by a trigger when the task is inserted, no longer a generated
column: PostgreSQL parsed the generated column's expression for every UPDATE of a task (every
claim, completion and requeue), though its inputs never change after submission (jobs.size_class).

The column is dropped and added again as a plain one, every task's class written once, and the
claim's index on it rebuilt."""

from django.db import migrations, models

from jobs.size_class import size_class_sql

# PostgreSQL: a BEFORE INSERT row trigger sets the class, whatever the insert gave (COPY too).
PG_FORWARD = f"""
CREATE FUNCTION jobs_task_size_class() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.size_class := {size_class_sql("NEW.")};
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_task_size_class BEFORE INSERT ON jobs_task
    FOR EACH ROW EXECUTE FUNCTION jobs_task_size_class();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS jobs_task_size_class ON jobs_task;
DROP FUNCTION IF EXISTS jobs_task_size_class();
"""


def forward(apps, schema_editor):  # noqa: ANN001
    schema_editor.execute(PG_FORWARD)
    schema_editor.execute(f"UPDATE jobs_task SET size_class = {size_class_sql()}")  # noqa: S608


def backward(apps, schema_editor):  # noqa: ANN001
    schema_editor.execute(PG_BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_job_cancel_requested_at")]

    operations = [
        migrations.RemoveIndex(model_name="task", name="task_claim_bucket"),
        migrations.RemoveField(model_name="task", name="size_class"),
        migrations.AddField(
            model_name="task",
            name="size_class",
            field=models.SmallIntegerField(default=0, editable=False),
        ),
        migrations.RunPython(forward, backward),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("state", "queued")),
                fields=["size_class", "-priority", "-min_vram_mb", "id"],
                name="task_claim_bucket",
            ),
        ),
    ]
