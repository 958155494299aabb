"""The Celery app. Tasks live in each app's tasks.py; schedules in computepool/schedules.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")

app = Celery("computepool")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from computepool import celery_metrics  # noqa: E402, F401 - connects the worker's and beat's metrics
