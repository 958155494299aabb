from django.contrib import admin
from django.http import HttpRequest

from ledger.models import Account, Entry, Event, EventSeal, Posting, SealBatch


class ReadOnlyAdmin(admin.ModelAdmin):
    """The log and the books are changed only by services; the admin shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "stream", "version", "type", "actor", "recorded_at")
    list_filter = ("type",)
    search_fields = ("stream", "idempotency_key", "actor")
    date_hierarchy = "recorded_at"
    show_full_result_count = False


class PostingInline(admin.TabularInline):
    model = Posting
    extra = 0
    can_delete = False
    readonly_fields = ("account", "amount", "currency")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "event", "created_at")
    list_filter = ("kind",)
    inlines = [PostingInline]
    show_full_result_count = False


@admin.register(Posting)
class PostingAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry", "account", "amount", "currency")
    search_fields = ("account__code",)
    show_full_result_count = False


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = ("code", "kind", "owner", "balance", "currency", "projected", "allow_negative")
    list_filter = ("kind", "currency")
    search_fields = ("code", "owner__username")


@admin.register(SealBatch)
class SealBatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "count", "first_seq", "last_seq", "head_hash", "sealed_at")


@admin.register(EventSeal)
class EventSealAdmin(ReadOnlyAdmin):
    list_display = ("seq", "event", "hash", "batch")
    show_full_result_count = False
