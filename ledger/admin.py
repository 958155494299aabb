from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ledger import registry
from ledger.display import credits, credits_per_s, money_column, rupees
from ledger.models import Account, Entry, Event, EventSeal, Posting, SealBatch


class ReadOnlyAdmin(admin.ModelAdmin):
    """The log and the books are changed only by services; the admin shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class EventTypeFilter(admin.SimpleListFilter):
    """The registered event types as the choices: a plain `list_filter = ("type",)` would read
    `SELECT DISTINCT type` over the whole log on every page, and the log keeps no index on
    `type` (every event written would pay for it; docs/decisions.md)."""

    title = "type"
    parameter_name = "type"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [(name, name) for name in sorted(registry.all_types())]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(type=self.value()) if self.value() else queryset


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "stream", "version", "type", "actor", "recorded_at")
    list_filter = (EventTypeFilter,)
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
    list_display = ("id", "entry", "account", money_column("amount", credits), "currency")
    search_fields = ("account__code",)
    show_full_result_count = False


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = (
        "code",
        "kind",
        "owner",
        money_column("balance", credits),
        "currency",
        "projected",
        "allow_negative",
    )
    list_filter = ("kind", "currency")
    search_fields = ("code", "owner__username")


@admin.register(SealBatch)
class SealBatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "count", "first_seq", "last_seq", "head_hash", "sealed_at")


@admin.register(EventSeal)
class EventSealAdmin(ReadOnlyAdmin):
    list_display = ("seq", "event", "hash", "batch")
    show_full_result_count = False


# --- The credit economy ----------------------------------------------------------------------
# Every change goes through the economy's services (events, compare-and-set); the admin is a
# front end to them, never a second way to write a row.

from datetime import timedelta  # noqa: E402

from django import forms  # noqa: E402
from django.contrib import messages  # noqa: E402
from django.contrib.admin import helpers  # noqa: E402
from django.db.models import Max, Min, QuerySet  # noqa: E402
from django.http import StreamingHttpResponse  # noqa: E402
from django.utils import timezone  # noqa: E402

from core.errors import DomainError  # noqa: E402
from ledger.cashouts import cashout_approve, cashout_mark_paid, cashout_reject  # noqa: E402
from ledger.exports import cashout_export_create, export_csv_chunks  # noqa: E402
from ledger.models import (  # noqa: E402
    Cashout,
    CashoutExport,
    CashoutExportLine,
    PriceBook,
    PriceRule,
    SpotPrice,
)
from ledger.pricing import price_book_copy, spot_bounds_set  # noqa: E402


def _in_force(book: PriceBook | None) -> bool:
    return book is not None and book.in_force_since_saved()


class PriceRuleInline(admin.TabularInline):
    """Base rates, tier and region multipliers: one table, editable while the book is a draft."""

    model = PriceRule
    extra = 0

    def has_add_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _in_force(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _in_force(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _in_force(obj) and super().has_delete_permission(request, obj)


@admin.register(PriceBook)
class PriceBookAdmin(admin.ModelAdmin):
    """Versions of the pricing rules. A book in force is read-only: copy it to change rules."""

    list_display = (
        "id",
        "name",
        "effective_from",
        "platform_fee_bps",
        money_column("min_cashout_paise", rupees, "minimum cashout"),
        "paise_per_credit",
        "in_force",
    )
    inlines = [PriceRuleInline]
    actions = ["copy_as_draft"]

    @admin.display(boolean=True, description="in force or past")
    def in_force(self, obj: PriceBook) -> bool:
        return obj.effective_from <= timezone.now()

    def has_change_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _in_force(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _in_force(obj) and super().has_delete_permission(request, obj)

    @admin.action(description="Copy as a new draft version (takes effect in 7 days; edit it)")
    def copy_as_draft(self, request: HttpRequest, queryset: QuerySet) -> None:
        for book in queryset:
            draft = price_book_copy(
                source=book,
                effective_from=timezone.now() + timedelta(days=7),
                name=f"{book.name} (draft)",
            )
            self.message_user(request, f"Draft v{draft.pk} copied from v{book.pk}.")


class SpotBoundsForm(forms.ModelForm):
    class Meta:
        model = SpotPrice
        fields = ("region", "tier", "min_per_s_minor", "max_per_s_minor")


@admin.register(SpotPrice)
class SpotPriceAdmin(admin.ModelAdmin):
    """Admins set the bounds; the market moves the price within them (both are events)."""

    form = SpotBoundsForm
    list_display = (
        "region",
        "tier",
        money_column("price_per_s_minor", credits_per_s, "price"),
        money_column("min_per_s_minor", credits_per_s, "lowest"),
        money_column("max_per_s_minor", credits_per_s, "highest"),
        "version",
        "updated_at",
    )
    list_filter = ("region",)
    readonly_fields = ("price_per_s_minor", "version", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: SpotPrice | None = None):
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "region", "tier"] if obj is not None else fields

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: SpotPrice, form, change: bool) -> None:
        saved = spot_bounds_set(
            region=obj.region,
            tier=obj.tier,
            min_price=obj.min_per_s_minor,
            max_price=obj.max_per_s_minor,
            actor=f"user:{request.user.pk}",
            reason="set in the admin",
        )
        obj.pk, obj.price_per_s_minor, obj.version = (
            saved.pk,
            saved.price_per_s_minor,
            saved.version,
        )


class CashoutActionForm(helpers.ActionForm):
    text = forms.CharField(
        required=False,
        label="Reason / payout reference",
        max_length=2000,
        help_text="Reject needs a reason; mark paid needs the payout reference (one cashout).",
    )


def _csv_download(export: CashoutExport) -> StreamingHttpResponse:
    response = StreamingHttpResponse(export_csv_chunks(export), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    return response


@admin.register(Cashout)
class CashoutAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "operator",
        "status",
        money_column("amount_minor", credits),
        money_column("fee_minor", credits),
        money_column("inr_paise", rupees, "paid out"),
        "requested_at",
        "approved_at",
        "paid_at",
        "payout_reference",
    )
    list_filter = ("status",)
    search_fields = ("operator__username", "payout_reference")
    action_form = CashoutActionForm
    actions = ["approve", "reject", "mark_paid", "export_selected"]

    def _run(self, request: HttpRequest, queryset: QuerySet, service, **kwargs) -> None:
        done = 0
        for cashout in queryset.order_by("id"):
            try:
                service(cashout_id=cashout.pk, actor=f"user:{request.user.pk}", **kwargs)
                done += 1
            except DomainError as exc:
                self.message_user(request, f"Cashout {cashout.pk}: {exc}", messages.ERROR)
        if done:
            self.message_user(request, f"{done} cashout(s) done.")

    @admin.action(description="Approve selected cashouts")
    def approve(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._run(request, queryset, cashout_approve)

    @admin.action(description="Reject selected cashouts (reason in the box)")
    def reject(self, request: HttpRequest, queryset: QuerySet) -> None:
        reason = request.POST.get("text", "").strip()
        if not reason:
            self.message_user(request, "Type the reason in the box first.", messages.ERROR)
            return
        self._run(request, queryset, cashout_reject, reason=reason)

    @admin.action(description="Mark one cashout paid (payout reference in the box)")
    def mark_paid(self, request: HttpRequest, queryset: QuerySet) -> None:
        reference = request.POST.get("text", "").strip()
        if not reference or queryset.count() != 1:
            self.message_user(
                request, "Select one cashout and type its payout reference.", messages.ERROR
            )
            return
        self._run(request, queryset, cashout_mark_paid, payout_reference=reference)

    @admin.action(description="Export selected approved/paid cashouts to CSV")
    def export_selected(self, request: HttpRequest, queryset: QuerySet):
        span = queryset.filter(approved_at__isnull=False).aggregate(
            lo=Min("approved_at"), hi=Max("approved_at")
        )
        if span["lo"] is None:
            self.message_user(request, "None of those is approved.", messages.ERROR)
            return None
        try:
            export = cashout_export_create(
                period_from=span["lo"],
                period_to=span["hi"] + timedelta(microseconds=1),
                actor=f"user:{request.user.pk}",
                cashout_ids=list(queryset.values_list("pk", flat=True)),
            )
        except DomainError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        return _csv_download(export)


@admin.register(CashoutExport)
class CashoutExportAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "period_from",
        "period_to",
        "count",
        money_column("total_amount_minor", credits, "total"),
        money_column("total_inr_paise", rupees, "total paid out"),
        "sha256",
        "created_by",
        "created_at",
    )
    actions = ["download"]

    @admin.action(description="Download the CSV (same bytes every time)")
    def download(self, request: HttpRequest, queryset: QuerySet):
        if queryset.count() != 1:
            self.message_user(request, "Select one export.", messages.ERROR)
            return None
        return _csv_download(queryset.get())


# Rows edited through their price book or export above, also listed on their own so every
# model can be searched from the admin.
@admin.register(PriceRule)
class PriceRuleAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "kind", "key", "value", "book")
    list_filter = ("kind", "book")


@admin.register(CashoutExportLine)
class CashoutExportLineAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "export",
        "cashout",
        "position",
        "operator_name",
        money_column("amount_minor", credits),
    )
    list_filter = ("export",)
