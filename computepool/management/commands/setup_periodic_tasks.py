from django.core.management.base import BaseCommand
from django.db import transaction
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from computepool.schedules import Schedule, schedules

# Rows this command owns carry this marker in their description, so a schedule removed from
# computepool/schedules.py is removed from the database too, and hand-made rows are left alone.
MARKER = "[computepool]"


def _when(schedule: Schedule) -> dict[str, object]:
    """The row's schedule: an interval, or a crontab once a day (a task has one or the other)."""
    if schedule.daily_at is None:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_s, period=IntervalSchedule.SECONDS
        )
        return {"interval": interval, "crontab": None}
    hour, minute = schedule.daily_at
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute=str(minute),
        hour=str(hour),
        day_of_week="*",
        day_of_month="*",
        month_of_year="*",
        timezone="UTC",
    )
    return {"interval": None, "crontab": crontab}


class Command(BaseCommand):
    help = "Install the periodic schedules declared in computepool/schedules.py (idempotent)."

    @transaction.atomic
    def handle(self, *args, **options):
        wanted = {s.name for s in schedules()}
        for schedule in schedules():
            when = _when(schedule)
            task, created = PeriodicTask.objects.update_or_create(
                name=schedule.name,
                defaults=when
                | {
                    "task": schedule.task,
                    "enabled": True,
                    "description": f"{MARKER} {schedule.description}",
                },
            )
            every = (
                f"every {schedule.every_s}s"
                if schedule.daily_at is None
                else "daily at {:02d}:{:02d} UTC".format(*schedule.daily_at)
            )
            self.stdout.write(
                f"{'installed' if created else 'up to date'}: {schedule.name} "
                f"({schedule.task} {every})"
            )
        stale = PeriodicTask.objects.filter(description__startswith=MARKER).exclude(name__in=wanted)
        for task in stale:
            self.stdout.write(f"removed: {task.name}")
        stale.delete()
