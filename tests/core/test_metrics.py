"""/metrics: Prometheus text, read from the database."""

import pytest

pytestmark = pytest.mark.django_db


def test_metrics_are_in_prometheus_format(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "computepool_events_total" in response.content.decode()
