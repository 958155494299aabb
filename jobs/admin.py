from django.contrib import admin
from django.http import HttpRequest

from core.admin import NoEditAdmin, act_on_each
from jobs.cancellation import job_cancel
from jobs.models import Artifact, Attempt, Job, LogChunk, Task, Verification
from ledger.display import credits, credits_per_s, money_column


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    fields = ("index", "replica", "state", "attempts", "available_at", "finished_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    max_num = 0


@admin.register(Job)
class JobAdmin(NoEditAdmin):
    list_display = (
        "id",
        "name",
        "submitter",
        "kind",
        "state",
        "slices",
        "tasks_succeeded",
        "tasks_failed",
        "priority",
        money_column("price_ceiling", credits_per_s, "price ceiling"),
        money_column("max_cost", credits, "held at most"),
        "created_at",
    )
    list_filter = ("state", "kind")
    search_fields = ("name", "submitter__username")
    date_hierarchy = "created_at"
    inlines = [TaskInline]
    actions = ["cancel"]
    show_full_result_count = False

    @admin.action(description="Cancel the selected jobs")
    def cancel(self, request: HttpRequest, queryset) -> None:
        actor = f"user:{request.user.pk}"
        act_on_each(
            request, queryset, lambda job: job_cancel(job=job, actor=actor), "Cancelled {n} job(s)."
        )


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    fields = (
        "number",
        "node",
        "state",
        "leased_at",
        "runtime_ms",
        "exit_code",
        "failure_class",
        "verdict",
    )
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    max_num = 0


@admin.register(Task)
class TaskAdmin(NoEditAdmin):
    list_display = (
        "id",
        "job",
        "index",
        "replica",
        "trusted_only",
        "state",
        "attempts",
        "priority",
        "available_at",
    )
    list_filter = ("state",)
    inlines = [AttemptInline]
    show_full_result_count = False


@admin.register(Attempt)
class AttemptAdmin(NoEditAdmin):
    list_display = (
        "id",
        "task",
        "node",
        "state",
        "leased_at",
        "lease_expires_at",
        "runtime_ms",
        money_column("price_per_s", credits_per_s, "price"),
        "exit_code",
        "failure_class",
        "verdict",
    )
    list_filter = ("state", "failure_class", "verdict")
    show_full_result_count = False


@admin.register(LogChunk)
class LogChunkAdmin(NoEditAdmin):
    list_display = ("id", "attempt", "stream", "seq", "received_at")
    show_full_result_count = False


@admin.register(Artifact)
class ArtifactAdmin(NoEditAdmin):
    list_display = ("id", "attempt", "name", "size", "sha256", "created_at")


@admin.register(Verification)
class VerificationAdmin(NoEditAdmin):
    """Verified slices (jobs.verification): why each was checked and what was concluded."""

    list_display = ("id", "job", "index", "reason", "quorum", "budget", "state", "decided_at")
    list_filter = ("state", "reason")
    readonly_fields = ("detail",)
    show_full_result_count = False
