"""What every app's admin shares."""

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from core.errors import DomainError


class NoEditAdmin(admin.ModelAdmin):
    """For projections of the event log (jobs, inference requests): they change only through
    their services, each change an event; the admin shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def act_on_each(
    request: HttpRequest, objects: Iterable[Any], act: Callable[[Any], object], done: str
) -> None:
    """An admin action's loop: `act` on each object; one that is refused (a domain error) is a
    warning naming it, the others are counted in the `done` message ("{n}" is the count)."""
    count = 0
    for obj in objects:
        try:
            act(obj)
            count += 1
        except DomainError as exc:
            messages.warning(request, f"{obj}: {exc}")
    messages.success(request, done.format(n=count))
