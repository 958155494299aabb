"""The API's answer to a path it does not serve: its own 404, in the documented error shape,
never the HTML page that lists the URL patterns (which Django shows with DEBUG on)."""

from django.http import HttpRequest, JsonResponse


def api_not_found(request: HttpRequest, unknown: str = "") -> JsonResponse:
    return JsonResponse({"error": "not_found", "detail": "Not found.", "fields": {}}, status=404)
