from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.display import percent
from ledger.admin import ReadOnlyAdmin
from ledger.display import credits_per_s, money_column
from nodes.models import AgentKey, DriverBlock, GpuTier, Node, NodeBenchmark, Ownership
from nodes.services import (
    Rule,
    benchmark_issue,
    driver_blocks_enforce,
    node_quarantine,
    node_quarantine_lift,
    node_retire,
    node_tier_confirm,
)
from nodes.trust import node_vouch


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.pk}"


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    """Nodes change state only through services (each change is an event): the admin shows
    them and acts through actions."""

    list_display = (
        "id",
        "name",
        "operator",
        "state",
        "tier",
        "claimed_tier",
        "region",
        "gpu_name",
        "benchmarked_at",
        "reliability_shown",
        money_column("price_floor", credits_per_s, "price floor"),
        "last_heartbeat_at",
        "quarantine_rule",
    )
    list_filter = ("state", "tier", "region", "quarantine_rule", "fp16_ok")
    search_fields = ("name", "operator__username", "gpu_name", "agent_key_prefix")
    list_select_related = ("operator",)
    show_full_result_count = False
    actions = [
        "lift_quarantine",
        "quarantine",
        "retire",
        "benchmark_now",
        "confirm_claimed_tier",
        "withdraw_confirmed_tier",
        "vouch",
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Node | None = None) -> list[str]:
        return [field.name for field in Node._meta.fields]

    @admin.display(description="reliability", ordering="reliability")
    def reliability_shown(self, node: Node) -> str:
        return percent(node.reliability)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # nodes are registered by their agent, which receives the key

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # retire instead: the history stays

    @admin.action(description="Lift the quarantine of the selected nodes")
    def lift_quarantine(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        lifted = sum(node_quarantine_lift(node=node, actor=_actor(request)) for node in queryset)
        messages.success(request, f"Lifted the quarantine of {lifted} node(s).")

    @admin.action(description="Quarantine the selected nodes")
    def quarantine(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        done = sum(
            node_quarantine(
                node=node,
                rule=Rule.ADMIN,
                actor=_actor(request),
                reason="Quarantined by an admin; contact support.",
            )
            for node in queryset
        )
        messages.success(request, f"Quarantined {done} node(s).")

    @admin.action(description="Benchmark the selected nodes now")
    def benchmark_now(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            benchmark_issue(node=node, reason="admin", actor=_actor(request))
        messages.success(request, f"Issued a benchmark to {queryset.count()} node(s).")

    @admin.action(
        description="Confirm the claimed tier of the selected nodes (GPUs the benchmark "
        "cannot measure: AMD, Apple)"
    )
    def confirm_claimed_tier(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            node_tier_confirm(
                node=node,
                tier=node.claimed_tier,
                actor=_actor(request),
                reason=f"confirmed in the admin by {request.user.get_username()}",
            )
        messages.success(request, f"Confirmed the claimed tier of {queryset.count()} node(s).")

    @admin.action(description="Vouch for the selected nodes (trusted without verified results)")
    def vouch(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        reason = f"vouched for in the admin by {request.user.get_username()}"
        done = sum(node_vouch(node=node, actor=_actor(request), reason=reason) for node in queryset)
        messages.success(request, f"Vouched for {done} node(s).")

    @admin.action(description="Withdraw the confirmed tier of the selected nodes")
    def withdraw_confirmed_tier(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset.exclude(confirmed_tier=""):
            node_tier_confirm(
                node=node,
                tier="",
                actor=_actor(request),
                reason=f"withdrawn in the admin by {request.user.get_username()}",
            )
        messages.success(request, "Withdrawn.")

    @admin.action(description="Retire the selected nodes (revokes their agent keys)")
    def retire(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        done = sum(node_retire(node=node, actor=_actor(request)) for node in queryset)
        messages.success(request, f"Retired {done} node(s).")


@admin.register(AgentKey)
class AgentKeyAdmin(ReadOnlyAdmin):
    """Read-only: a key is issued at registration (its plaintext shown once to the agent) and
    revoked by retiring its node."""

    list_display = ("node", "key_prefix", "revoked_at")
    search_fields = ("node__name", "node__agent_key_prefix", "node__operator__username")
    list_select_related = ("node",)
    readonly_fields = ("node", "key_hash")
    show_full_result_count = False

    @admin.display(description="prefix")
    def key_prefix(self, obj: AgentKey) -> str:
        return obj.node.agent_key_prefix

    @admin.display(description="revoked at")
    def revoked_at(self, obj: AgentKey) -> object:
        return obj.node.key_revoked_at


@admin.register(Ownership)
class OwnershipAdmin(ReadOnlyAdmin):
    """Read-only: written with the node at registration; a node's operator never changes."""

    list_display = ("node", "operator")
    search_fields = ("node__name", "operator__username")
    list_select_related = ("node", "operator")
    readonly_fields = ("node", "operator")
    show_full_result_count = False


@admin.register(GpuTier)
class GpuTierAdmin(admin.ModelAdmin):
    """Edits apply to nodes as they register or report their hardware (each agent start).
    A tier's multiplier is edited in the price book (ledger), as a new version."""

    list_display = (
        "slug",
        "label",
        "kind",
        "pattern",
        "mobile",
        "min_vram_mb",
        "min_fp32_tflops",
        "max_fp32_tflops",
        "rank",
    )
    list_editable = ("rank",)
    list_filter = ("kind", "mobile")
    search_fields = ("slug", "label", "pattern")


@admin.register(NodeBenchmark)
class NodeBenchmarkAdmin(ReadOnlyAdmin):
    """Read-only: benchmarks are issued by the hub and reported by agents."""

    list_display = ("id", "node", "reason", "state", "tier", "issued_at", "finished_at")
    list_filter = ("state", "reason")
    search_fields = ("node__name",)
    list_select_related = ("node",)
    readonly_fields = [field.name for field in NodeBenchmark._meta.fields]
    show_full_result_count = False


@admin.register(DriverBlock)
class DriverBlockAdmin(admin.ModelAdmin):
    list_display = ("vendor", "pattern", "reason", "created_at")
    search_fields = ("pattern", "reason")
    readonly_fields = ("created_at",)

    def save_model(self, request: HttpRequest, obj: DriverBlock, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        count = driver_blocks_enforce(actor=_actor(request))
        if count:
            messages.warning(request, f"Quarantined {count} node(s) running a blocked driver.")
