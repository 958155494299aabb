import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from computepool.schedules import schedules

pytestmark = pytest.mark.django_db


def test_it_installs_every_schedule_once_however_often_it_runs():
    call_command("setup_periodic_tasks")
    call_command("setup_periodic_tasks")
    installed = {t.name: t for t in PeriodicTask.objects.all()}
    assert set(installed) == {s.name for s in schedules()}
    for schedule in schedules():
        row = installed[schedule.name]
        assert row.task == schedule.task
        if schedule.daily_at is None:
            assert row.interval.every == schedule.every_s and row.crontab is None
        else:
            assert row.interval is None
            assert (int(row.crontab.hour), int(row.crontab.minute)) == schedule.daily_at


def test_beat_verifies_the_ledger_every_night():
    call_command("setup_periodic_tasks")
    row = PeriodicTask.objects.get(task="ledger.verify")
    assert (row.crontab.hour, row.crontab.minute, row.crontab.day_of_week) == ("3", "30", "*")
    assert str(row.crontab.timezone) == "UTC"


def test_it_removes_its_own_stale_rows_and_leaves_hand_made_ones():
    call_command("setup_periodic_tasks")
    from django_celery_beat.models import IntervalSchedule

    every = IntervalSchedule.objects.first()
    PeriodicTask.objects.create(
        name="old", task="x", interval=every, description="[computepool] gone"
    )
    PeriodicTask.objects.create(name="by hand", task="y", interval=every)
    call_command("setup_periodic_tasks")
    names = set(PeriodicTask.objects.values_list("name", flat=True))
    assert "old" not in names and "by hand" in names


def test_every_scheduled_task_is_registered_with_celery():
    from computepool.celery import app

    app.loader.import_default_modules()
    for schedule in schedules():
        assert schedule.task in app.tasks, schedule.task
