"""Prometheus metrics read from the database at scrape time.

Counting in the database (not in process memory) gives the same answer from every hub process
behind a load balancer, with no multiprocess bookkeeping. Apps add their gauges with
`register_gauge` from AppConfig.ready.
"""

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
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


def _ledger_samples() -> Iterable[tuple[dict[str, str], float]]:
    from ledger.models import Event, EventSeal

    total = Event.objects.count()
    sealed = EventSeal.objects.count()
    return [({"kind": "all"}, total), ({"kind": "unsealed"}, total - sealed)]


register_gauge("computepool_events_total", "Events in the ledger's log.", _ledger_samples)
