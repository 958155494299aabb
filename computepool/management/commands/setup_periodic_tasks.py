from django.core.management.base import BaseCommand
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from computepool.schedules import schedules

# Rows this command owns carry this marker in their description, so a schedule removed from
# computepool/schedules.py is removed from the database too, and hand-made rows are left alone.
MARKER = "[computepool]"


class Command(BaseCommand):
    help = "Install the periodic schedules declared in computepool/schedules.py (idempotent)."

    @transaction.atomic
    def handle(self, *args, **options):
        wanted = {s.name for s in schedules()}
        for schedule in schedules():
            interval, _ = IntervalSchedule.objects.get_or_create(
                every=schedule.every_s, period=IntervalSchedule.SECONDS
            )
            task, created = PeriodicTask.objects.update_or_create(
                name=schedule.name,
                defaults={
                    "task": schedule.task,
                    "interval": interval,
                    "enabled": True,
                    "description": f"{MARKER} {schedule.description}",
                },
            )
            self.stdout.write(
                f"{'installed' if created else 'up to date'}: {schedule.name} "
                f"({schedule.task} every {schedule.every_s}s)"
            )
        stale = PeriodicTask.objects.filter(description__startswith=MARKER).exclude(name__in=wanted)
        for task in stale:
            self.stdout.write(f"removed: {task.name}")
        stale.delete()
