"""/healthz: a plain Django view, outside the API's auth and throttling."""

import logging

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

log = logging.getLogger(__name__)


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "down"; the message says which
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    from kombu import Connection

    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    try:
        with Connection(
            settings.CELERY_BROKER_URL, transport_options=options, connect_timeout=2
        ) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # any failure means "down"
        return f"{type(exc).__name__}: {exc}"
    return None


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check_database(), "broker": _check_broker()}
    ok = all(v is None for v in checks.values())
    body = {
        "status": "ok" if ok else "unavailable",
        "checks": {k: ("ok" if v is None else v) for k, v in checks.items()},
        "database": connection.vendor,
        "broker": settings.CELERY_BROKER_URL.split("://", 1)[0],
    }
    if not ok:
        log.warning("health check failed: %s", body["checks"])
    return JsonResponse(body, status=200 if ok else 503)
