"""Reading /metrics as Prometheus would: the real text format, parsed by prometheus-client."""

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
_ROW = re.compile(r"^\| `(computepool_\w+)` \| (\w+) \|([^|]*)\|")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def families(text: str) -> dict[str, tuple[str, set[str]]]:
    """Exposed name (a counter's with `_total`) -> (type, the label names its samples carry)."""
    found = {}
    for family in text_string_to_metric_families(text):
        name = family.name
        if family.type == "counter" and not name.endswith("_total"):
            name += "_total"
        labels = {k for sample in family.samples for k in sample.labels} - {"le"}
        found[name] = (family.type, labels)
    return found


def documented() -> dict[str, tuple[str, set[str]]]:
    """docs/metrics.md's table: name -> (type, label names)."""
    rows = {}
    for line in DOC.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            name, kind, labels = match.groups()
            rows[name] = (kind, set(re.findall(r"`(\w+)`", labels)))
    return rows


def samples(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    return samples(response.content.decode())


def value(found: Samples, name: str, **labels: str) -> float:
    """A sample's value, 0 when absent (a counter's child before its first increment)."""
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def total(found: Samples, name: str, **labels: str) -> float:
    """The sum of every sample of `name` whose labels include `labels`."""
    return sum(
        v for (n, have), v in found.items() if n == name and set(labels.items()) <= set(have)
    )
