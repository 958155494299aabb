"""Every middleware runs in the mode of its chain: under ASGI (the relay's hubs) a sync-only one
makes Django hop each request into a thread and back, every push of an agent's tokens among
them."""

from asgiref.sync import async_to_sync, iscoroutinefunction
from django.conf import settings
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils import timezone
from django.utils.module_loading import import_string

from core.viewer_zone import ViewerTimeZoneMiddleware


def test_it_has_no_middleware_that_only_runs_sync():
    sync_only = [path for path in settings.MIDDLEWARE if not import_string(path).async_capable]
    assert sync_only == []


def test_it_activates_the_viewers_zone_in_an_async_chain():
    seen = []

    async def view(request):
        seen.append(timezone.get_current_timezone_name())
        return HttpResponse()

    middleware = ViewerTimeZoneMiddleware(view)
    assert iscoroutinefunction(middleware)
    request = RequestFactory().get("/")
    request.COOKIES["tz"] = "Asia/Kolkata"
    async_to_sync(middleware)(request)
    assert seen == ["Asia/Kolkata"]
    assert timezone.get_current_timezone_name() == "UTC"
