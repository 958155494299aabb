"""/metrics: Prometheus text, read from the database without counting its large tables."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from ledger.chain import chain_seal
from tests.ledger.helpers import append


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def events(client, kind: str) -> float:
    return scrape(client)[("computepool_events", (("kind", kind),))]


@pytest.mark.django_db
def test_metrics_are_in_prometheus_format(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "computepool_events" in response.content.decode()


# The sealer takes only committed events, so this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_it_reports_the_log_and_its_unsealed_tail(client):
    first = [append(f"job:{i}") for i in range(3)]
    assert events(client, "all") == events(client, "unsealed") == first[-1].id  # nothing sealed
    chain_seal()
    assert events(client, "unsealed") == 0
    later = [append(f"job:{i}") for i in range(2)]
    assert events(client, "all") == later[-1].id
    assert events(client, "unsealed") == 2


@pytest.mark.django_db
def test_a_scrape_does_not_count_the_whole_log(client):
    append("job:1")
    with CaptureQueriesContext(connection) as queries:
        scrape(client)
    on_the_log = [q["sql"] for q in queries if '"ledger_event"' in q["sql"]]
    assert on_the_log
    assert all("WHERE" in sql for sql in on_the_log if "COUNT(" in sql.upper()), on_the_log
