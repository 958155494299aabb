"""What every app's admin shares."""

from django.contrib import admin
from django.http import HttpRequest


class NoEditAdmin(admin.ModelAdmin):
    """For projections of the event log (jobs, inference requests): they change only through
    their services, each change an event; the admin shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
