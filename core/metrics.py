"""/metrics: Prometheus gauges read from the database at scrape time.

Reading the database (not process memory) gives the same answer from every hub process behind
a load balancer, with no multiprocess bookkeeping. Apps add their gauges with `register_gauge`
from AppConfig.ready. Every scraper asks every few seconds, so a gauge reads an index or a
small table, never every row of a large one.
"""

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
from prometheus_client.registry import Collector

# name -> (help, function returning [(labels dict, value)])
GaugeSource = Callable[[], Iterable[tuple[dict[str, str], float]]]
_GAUGES: dict[str, tuple[str, GaugeSource]] = {}


def register_gauge(name: str, help_text: str, source: GaugeSource) -> None:
    _GAUGES[name] = (help_text, source)


class DatabaseCollector(Collector):
    def collect(self) -> Iterable[GaugeMetricFamily]:
        for name, (help_text, source) in sorted(_GAUGES.items()):
            samples = list(source())
            labels = sorted({k for sample_labels, _ in samples for k in sample_labels})
            family = GaugeMetricFamily(name, help_text, labels=labels)
            for sample_labels, value in samples:
                family.add_metric([sample_labels.get(k, "") for k in labels], value)
            yield family


_registry = CollectorRegistry()
_registry.register(DatabaseCollector())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
