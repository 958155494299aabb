"""Times in the viewer's own time zone, in pages and in the admin.

The browser says which zone it is in: web/static/web/local-time.js stores its IANA name
(`Intl.DateTimeFormat().resolvedOptions().timeZone`) in the cookie `tz` on every page the hub
serves, the admin's included. This middleware activates that zone for the request, so that
everything Django renders from a datetime (the admin's lists and forms) is in it. A missing or
unknown name leaves UTC. The web app's own pages rewrite their <time> elements in the browser as
well, so even a first visit, before the cookie exists, reads in the viewer's zone there.
"""

from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = viewer_zone(request)
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
