"""One HTTP session to a hub: the key on every request, the API's errors as exceptions, and
retries where sending again is safe."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests

from computepool_client.errors import HubError, HubUnavailable
from computepool_client.operations import Operation

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
RETRIES = 5
RETRY_AFTER_CAP_S = 60.0
# Answers that say "not now" rather than "no": a proxy or a hub restarting.
UNAVAILABLE = frozenset({502, 503, 504})


class Transport:
    """`call(operation, …)` sends one row of operations.OPERATIONS. `trace`, a file path, gets
    one JSON line per request (method, path, query, body, status; never the key): what the
    client really sent, which the tests check against the hub's schema."""

    def __init__(
        self,
        hub: str,
        key: str,
        *,
        session: requests.Session | None = None,
        trace: str | Path | None = None,
        user_agent: str = "computepool-client",
    ) -> None:
        self.hub = hub.rstrip("/")
        self.session = session or requests.Session()
        # requests drops this header when a redirect leaves the hub's host (a download sent to
        # a signed storage URL), so the key never reaches anyone else.
        self.session.headers["Authorization"] = f"Bearer {key}"
        self.session.headers["User-Agent"] = user_agent
        self.trace = Path(trace) if trace else None

    def call(
        self,
        operation: Operation,
        *,
        path_params: Mapping[str, int] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
    ) -> requests.Response:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        unknown = set(params) - set(operation.query)
        if unknown:  # a programming error here, never a request the schema does not describe
            raise ValueError(f"{operation.operation_id} takes no {sorted(unknown)}")
        url = self.hub + operation.url_path(**(path_params or {}))
        for attempt in range(RETRIES + 1):
            last = attempt == RETRIES
            try:
                response = self.session.request(
                    operation.method,
                    url,
                    params=params,
                    json=body,
                    headers=dict(headers or {}),
                    stream=stream,
                    timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                if last or not operation.retry_safe:
                    what = (
                        "timed out"
                        if isinstance(exc, requests.Timeout)
                        else "refused or unreachable"
                    )
                    raise HubUnavailable(f"{self.hub}: {what} ({type(exc).__name__})") from exc
                time.sleep(_backoff(attempt))
                continue
            self._record(operation, url, params, body, response.status_code)
            if response.status_code == 429 and not last:
                time.sleep(_retry_after(response, attempt))
                continue
            if response.status_code in UNAVAILABLE and operation.retry_safe and not last:
                time.sleep(_retry_after(response, attempt))
                continue
            return _checked(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _record(
        self, operation: Operation, url: str, query: Mapping[str, Any], body: Any, status: int
    ) -> None:
        if self.trace is None:
            return
        line = {
            "method": operation.method,
            "path": url[len(self.hub) :],
            "query": {k: str(v) for k, v in query.items()},
            "body": body,
            "status": status,
        }
        with self.trace.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _backoff(attempt: int) -> float:
    return min(8.0, 0.5 * 2.0**attempt)


def _retry_after(response: requests.Response, attempt: int) -> float:
    value = response.headers.get("Retry-After", "")
    if value.isdigit():
        return min(RETRY_AFTER_CAP_S, float(value))
    return _backoff(attempt)


def _checked(response: requests.Response) -> requests.Response:
    status = response.status_code
    if status < 400:
        return response
    if status >= 500:
        raise HubUnavailable(f"the hub failed: {status} {response.reason}")
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or "error" not in payload:
        raise HubError(status, "http_error", f"{response.reason} (not the API's error shape)")
    fields = payload.get("fields")
    raise HubError(
        status,
        str(payload.get("error")),
        str(payload.get("detail", "")),
        fields if isinstance(fields, dict) else None,
    )
