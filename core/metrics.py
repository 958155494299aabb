"""/metrics: what happened (counters, histograms) and what is (gauges read from the database).

Two kinds of figure, kept apart on purpose:

- Counters and histograms are incremented where things happen (a claim, a settlement, a reaper
  batch), in the process where they happen. Apps declare them once, in their own `metrics.py`,
  with `counter` and `histogram` below. A hub runs several processes (gunicorn's workers), so
  with `PROMETHEUS_MULTIPROC_DIR` set prometheus-client keeps each process's values in a file
  there and a scrape of any one process sums them all; without it (one process: tests, the
  development server) a scrape reads the process's own values.
- Gauges of the state of the hub (the queue, nodes, holds, cashouts) are read from the database
  at scrape time: the same answer from every process, with no bookkeeping to drift. Apps add them
  with `register_gauge` from AppConfig.ready. Each source reads an index or a small table, never
  every row of a large one, and a source that runs a grouped query caches its rows for
  METRICS_CACHE_S seconds (`cached`), so scrapers that ask every few seconds run it at most once
  per period per process.
"""

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from typing import TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

T = TypeVar("T")

# No `_created` series: multiprocess mode has none, and one process must read like many.
disable_created_metrics()

# Every counter and histogram of this process, declared once by the app that owns it.
LIVE = CollectorRegistry(auto_describe=True)


def after_commit(count: Callable[[], object]) -> None:
    """Count once the caller's transaction commits, so that a rolled-back change is never
    counted; at once where there is nothing to wait for (autocommit), and where the caller
    manages its transaction by hand, which Django gives no commit hook for (a count then, not
    a refusal of the work it counts)."""
    if not connection.get_autocommit() and not connection.in_atomic_block:
        count()
    else:
        transaction.on_commit(count)


def counter(name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
    return Counter(name, help_text, labels, registry=LIVE)


def histogram(
    name: str, help_text: str, buckets: Sequence[float], labels: Sequence[str] = ()
) -> Histogram:
    return Histogram(name, help_text, labels, buckets=buckets, registry=LIVE)


# Buckets shared by the latencies: a claim takes milliseconds, a reaper run up to seconds, a
# dispatch may wait minutes.
SECONDS_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SECONDS_SLOW = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


# name -> (help, function returning [(labels dict, value)])
GaugeSource = Callable[[], Iterable[tuple[dict[str, str], float]]]
_GAUGES: dict[str, tuple[str, GaugeSource]] = {}


def register_gauge(name: str, help_text: str, source: GaugeSource) -> None:
    _GAUGES[name] = (help_text, source)


def cached(query: Callable[[], T]) -> Callable[[], T]:
    """`query`'s result, kept for METRICS_CACHE_S seconds in this process: every gauge that
    reads the same grouped query shares one run of it per period."""
    lock = threading.Lock()
    kept: list = []  # [(taken at, result)] once run

    @wraps(query)
    def read() -> T:
        with lock:
            now = time.monotonic()
            if not kept or now - kept[0][0] >= settings.METRICS_CACHE_S:
                kept[:] = [(now, query())]
            return kept[0][1]

    return read


class DatabaseCollector(Collector):
    def collect(self) -> Iterable[GaugeMetricFamily]:
        for name, (help_text, source) in sorted(_GAUGES.items()):
            samples = list(source())
            labels = sorted({k for sample_labels, _ in samples for k in sample_labels})
            family = GaugeMetricFamily(name, help_text, labels=labels)
            for sample_labels, value in samples:
                family.add_metric([sample_labels.get(k, "") for k in labels], value)
            yield family


class _LiveCollector(Collector):
    """This process's own counters and histograms (no multiprocess directory)."""

    def collect(self) -> Iterable[Metric]:
        return LIVE.collect()


def multiprocess() -> bool:
    # prometheus-client reads the variable when it is imported, as this does.
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def exposition(*, database: bool) -> CollectorRegistry:
    """What a scrape of this process shows: the counters and histograms (every process's, in
    multiprocess mode) and, with `database`, the gauges read from the database. The hub shows
    both; the worker and beat only theirs (the hub already answers for the database)."""
    registry = CollectorRegistry(auto_describe=True)
    if multiprocess():
        # A process started with the variable but no directory yet (a one-off `manage.py`)
        # must not fail on it.
        os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
        MultiProcessCollector(registry)
    else:
        registry.register(_LiveCollector())
    if database:
        registry.register(DatabaseCollector())
    return registry


_hub = exposition(database=True)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(_hub), content_type=CONTENT_TYPE_LATEST)
