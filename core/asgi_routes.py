"""The relay's paths on a lean ASGI handler: no thread hop per request.

Under ASGI, Django's handler gives each request a thread of its own (its
ThreadSensitiveContext), created for the request_started signal's receivers and shut down on
the event loop when the request ends, and each of Django's own middleware (sessions, CSRF,
auth, messages, ...) runs its hooks in that thread, two hops each. The relay's views
(inference.relay_views, inference.agent_relay) are async, authenticate with bearer keys, keep
no session and do their database work on a pool of their own (inference.db_threads): none of
that serves them, yet an agent pushes tokens up to a hundred times a second and every stream's
opening waits on it. For exactly these paths this handler:

- keeps no per-request thread (the signals' few sync receivers run on asgiref's one shared
  thread);
- runs one middleware, SecurityMiddleware's checks and headers, called on the loop: they read
  settings and set headers, no I/O.

Every other path goes through Django's handler and the full chain, unchanged.
"""

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.middleware.security import SecurityMiddleware
from django.urls import reverse

# By name, so that the paths are the URLconf's (inference/urls.py, inference/agent_urls.py).
ROUTES = ("v1-chat-completions", "v1-completions", "agent-inference-poll", "agent-inference-push")


class _Security:
    """SecurityMiddleware's process_request and process_response, on the event loop."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.hooks = SecurityMiddleware(get_response)

    async def __call__(self, request):
        response = self.hooks.process_request(request)
        if response is None:
            response = await self.get_response(request)
        return self.hooks.process_response(request, response)


class LeanHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        inner = convert_exception_to_response(self._get_response_async)
        self._middleware_chain = convert_exception_to_response(_Security(inner))

    async def __call__(self, scope, receive, send):
        await self.handle(scope, receive, send)


def with_lean_relay(application):
    """`application` for every path but the relay's, which go to a LeanHandler."""
    lean = LeanHandler()
    paths = frozenset(reverse(name) for name in ROUTES)

    async def route(scope, receive, send):
        if scope["type"] == "http" and scope["path"] in paths:
            return await lean(scope, receive, send)
        return await application(scope, receive, send)

    return route
