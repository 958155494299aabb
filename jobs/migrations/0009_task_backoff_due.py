"""An index for when the first backoff ends: a long-polling claim sleeps no longer than until
then (jobs.selectors.queue_backoff_ends). Requeued tasks only, so submissions write nothing to it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0008_task_arrays'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='task',
            index=models.Index(condition=models.Q(('attempts__gt', 0), ('state', 'queued')), fields=['available_at'], name='task_backoff_due'),
        ),
    ]
