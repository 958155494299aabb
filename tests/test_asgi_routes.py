"""The relay's paths run on the lean ASGI handler (no thread of their own per request, and only
the security middleware, on the loop); every other path keeps Django's handler and the whole
chain, whose middleware each hop into the request's thread."""

import json

import pytest
from asgiref.sync import ThreadSensitiveContext, async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.urls import resolve, reverse
from django.utils.deprecation import MiddlewareMixin

from computepool.asgi import application
from core.asgi_routes import ROUTES


def _scope(path: str) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }  # fmt: skip


@async_to_sync
async def _post(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    app = ApplicationCommunicator(application, _scope(path))
    await app.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await app.receive_output(5)
    body = await app.receive_output(5)
    await app.wait(5)
    return start["status"], dict(start["headers"]), body["body"]


@pytest.fixture
def seen(monkeypatch) -> list[str]:
    """What ran: each request's own thread context, each hop of a Django middleware."""
    calls: list[str] = []
    enter, hop = ThreadSensitiveContext.__aenter__, MiddlewareMixin.__acall__

    async def entered(self):
        calls.append("request thread")
        return await enter(self)

    async def hopped(self, request):
        calls.append(type(self).__name__)
        return await hop(self, request)

    monkeypatch.setattr(ThreadSensitiveContext, "__aenter__", entered)
    monkeypatch.setattr(MiddlewareMixin, "__acall__", hopped)
    return calls


def test_a_push_gets_no_thread_of_its_own_nor_djangos_middleware_but_its_security_headers(seen):
    status, headers, body = _post("/api/v1/agent/inference/push")
    assert status == 401 and json.loads(body)["error"] == "not_authenticated"
    assert seen == []
    assert headers[b"X-Content-Type-Options"] == b"nosniff"
    assert headers[b"Referrer-Policy"] == b"same-origin"
    assert b"Vary" not in headers  # no session, auth or CSRF middleware looked at it


def test_other_paths_keep_djangos_handler_and_the_whole_chain(seen):
    status, headers, _ = _post("/api/v1/nodes")
    assert status == 403  # the CSRF middleware ran: a POST with no cookie
    assert seen[0] == "request thread"
    assert {"SessionMiddleware", "CsrfViewMiddleware", "AuthenticationMiddleware"} <= set(seen)
    assert headers[b"X-Content-Type-Options"] == b"nosniff"


def test_the_lean_paths_are_the_relays_async_views_with_no_csrf_to_check():
    paths = {reverse(name) for name in ROUTES}
    assert paths == {
        "/v1/chat/completions",
        "/v1/completions",
        "/api/v1/agent/inference/poll",
        "/api/v1/agent/inference/push",
    }
    for path in paths:
        view = resolve(path).func
        assert view.view_class.view_is_async and view.csrf_exempt, path
