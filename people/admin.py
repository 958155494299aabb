from django.contrib import admin, messages
from django.http import HttpRequest

from people.models import ApiKey, PublicProfile
from people.services import api_key_revoke, public_name_set


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "role", "created_at", "last_used_at", "revoked_at")
    list_filter = ("role", "revoked_at")
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = (
        "user",
        "role",
        "name",
        "prefix",
        "key_hash",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Keys are issued with `manage.py create_api_key` or the API, which show the secret once.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset) -> None:
        for key in queryset:
            api_key_revoke(key=key, actor=f"user:{request.user.pk}")
        messages.success(request, f"Revoked {queryset.count()} key(s).")


@admin.register(PublicProfile)
class PublicProfileAdmin(admin.ModelAdmin):
    """The names operators show on the network page. Only they choose one; an admin may hide
    one (a name that impersonates or offends), which the operator sees on their account."""

    list_display = ("user", "public_name", "show_name", "updated_at")
    list_filter = ("show_name",)
    search_fields = ("public_name", "user__username")
    readonly_fields = ("user", "public_name", "show_name", "updated_at")
    actions = ["hide"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Stop showing the selected names")
    def hide(self, request: HttpRequest, queryset) -> None:
        for profile in queryset.select_related("user"):
            public_name_set(
                user=profile.user,
                show_name=False,
                public_name=profile.public_name,
                actor=f"user:{request.user.pk}",
            )
        messages.success(request, f"{queryset.count()} name(s) no longer shown.")
