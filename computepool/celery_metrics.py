"""The Celery worker's and beat's own /metrics (docs/metrics.md), through Celery's signals.

Off unless WORKER_METRICS_PORT or BEAT_METRICS_PORT is set: the process then serves its figures
on that port with prometheus-client's own HTTP server, started in the worker's main process
(before its pool forks) or in beat. A prefork pool's tasks run in child processes: with
PROMETHEUS_MULTIPROC_DIR set (docker-compose.yml sets it) each child writes its figures there
and the main process's server sums them; without it, only a solo or threads pool's figures
are seen. The database's gauges are the hub's to show, not these processes'.
"""

import logging
import time

from celery.signals import beat_init, before_task_publish, task_postrun, task_prerun, worker_init
from django.conf import settings

from core.metrics import SECONDS_SLOW, counter, exposition, histogram

log = logging.getLogger(__name__)

TASKS = counter(
    "computepool_celery_tasks_total",
    "Celery tasks the worker ran, by task name and final state (SUCCESS, FAILURE, RETRY, …).",
    ["task", "state"],
)
TASK_SECONDS = histogram(
    "computepool_celery_task_seconds",
    "How long each Celery task ran in the worker, by task name.",
    SECONDS_SLOW,
    ["task"],
)
BEAT_SENT = counter(
    "computepool_beat_sent_total", "Periodic tasks beat sent to the broker, by task name.", ["task"]
)

_started: dict[str, float] = {}  # task id -> perf_counter at its start, in the running process
_in_beat = False


def _serve(port: int | None, what: str) -> object:
    if port is None:
        return None
    from prometheus_client import start_http_server

    served = start_http_server(port, registry=exposition(database=False))
    log.info("%s metrics on :%s/metrics", what, port)
    return served


@worker_init.connect
def _worker_serves(**_: object) -> object:
    return _serve(settings.WORKER_METRICS_PORT, "worker")


@beat_init.connect
def _beat_serves(**_: object) -> object:
    global _in_beat
    _in_beat = True
    return _serve(settings.BEAT_METRICS_PORT, "beat")


@task_prerun.connect
def _task_starts(task_id: str, **_: object) -> None:
    _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_ends(task_id: str, task: object, state: str | None = None, **_: object) -> None:
    name = getattr(task, "name", "?")
    started = _started.pop(task_id, None)
    if started is not None:
        TASK_SECONDS.labels(name).observe(time.perf_counter() - started)
    TASKS.labels(name, state or "UNKNOWN").inc()


@before_task_publish.connect
def _beat_sends(sender: str | None = None, **_: object) -> None:
    # Every process publishes (the hub's alerts, too); only beat's sends are its schedule's.
    if _in_beat:
        BEAT_SENT.labels(sender or "?").inc()
