"""/healthz: the database and the broker, each named when it is down."""

import pytest

pytestmark = pytest.mark.django_db


def test_healthz_checks_the_database_and_the_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


def test_healthz_says_which_dependency_is_down(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"] != "ok"
