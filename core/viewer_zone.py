"""Times in the viewer's own time zone, in pages and in the admin.

The browser says which zone it is in: web/static/web/local-time.js stores its IANA name
(`Intl.DateTimeFormat().resolvedOptions().timeZone`) in the cookie `tz` on every page the hub
serves, the admin's included. This middleware activates that zone for the request, so that
everything Django renders from a datetime (the admin's lists and forms) is in it. A missing or
unknown name leaves UTC. The web app's own pages rewrite their <time> elements in the browser as
well, so even a first visit, before the cookie exists, reads in the viewer's zone there.
"""

from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

COOKIE = "tz"
# Every IANA name the server knows, read once: a cookie is only ever looked up in this set, so a
# forged value can neither name a file nor cost more than a set lookup.
_KNOWN = frozenset(available_timezones())


def viewer_zone(request: HttpRequest) -> ZoneInfo | None:
    name = request.COOKIES.get(COOKIE, "")
    if name not in _KNOWN:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


class ViewerTimeZoneMiddleware:
    """In the mode of the chain it is in: a sync-only middleware would make Django hop every
    request of an ASGI hub (each token an agent pushes, each stream a client opens) into a
    thread and back."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self._acall(request)
        _activate(request)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        _activate(request)
        try:
            return await self.get_response(request)
        finally:
            timezone.deactivate()


def _activate(request: HttpRequest) -> None:
    zone = viewer_zone(request)
    if zone is None:
        timezone.deactivate()
    else:
        timezone.activate(zone)
