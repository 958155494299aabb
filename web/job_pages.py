"""A submitter's jobs: the list, one job's page (live while it runs), cancel, and all of a
job's outputs as one zip. Own jobs only: another person's job answers like a missing one."""

from collections.abc import Iterator
from dataclasses import dataclass

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from core.errors import DomainError
from jobs.cancellation import job_cancel
from jobs.models import Artifact, Attempt, Job, JobState, LogChunk
from ledger.settlement import settlements_for_attempts
from web.job_zip import job_zip_chunks
from web.placement import placement_reasons
from web.roles import SubmitterPage

PAGE_SIZE = 50
LOG_CHUNKS_SHOWN = 500  # the newest ones; the API pages through all of them
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
# What the list reads of a job: its counters give the progress bar with no query per row.
LIST_FIELDS = (
    "id", "name", "kind", "state", "slices", "replicas", "extra_tasks", "tasks_succeeded",
    "tasks_failed", "tasks_cancelled", "max_cost", "created_at", "finished_at",
    "cancel_requested_at",
)  # fmt: skip


def progress_percent(job: Job) -> int:
    """Tasks ended over tasks the job has, from the job row's own counters."""
    total = job.tasks_total
    return 100 if not total else min(100, job.tasks_done * 100 // total)


def _own_jobs(request: HttpRequest):
    return Job.objects.filter(submitter=request.user)


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    # More than 18 digits is no id, and could overflow a bigint.
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


class JobsPage(SubmitterPage, View):
    """Your jobs, newest first, a page at a time by id (keyset: the job_submitter_recent index
    serves any page as fast as the first)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        state = request.GET.get("state", "")
        jobs = _own_jobs(request).only(*LIST_FIELDS).order_by("-id")
        if state in JobState.values:
            jobs = jobs.filter(state=state)
        else:
            state = ""
        before = _int_param(request, "before")
        if before is not None:
            jobs = jobs.filter(id__lt=before)
        rows = list(jobs[: PAGE_SIZE + 1])
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        return render(
            request,
            "web/jobs/list.html",
            {
                "rows": [(job, progress_percent(job)) for job in rows],
                "state": state,
                "states": JobState.values,
                "next_before": rows[-1].pk if more else None,
                "first_page": before is None,
            },
        )


@dataclass
class JobView:
    """What the job's page shows, read in a fixed number of queries whatever its size."""

    job: Job
    percent: int
    ended: bool
    tasks: list
    settlements: dict
    cost_minor: int
    artifacts: list[Artifact]
    logs: list[LogChunk]
    reasons: list[str]


def job_view(job_id: int, request: HttpRequest) -> JobView:
    job = get_object_or_404(
        _own_jobs(request).prefetch_related(
            Prefetch(
                "tasks__attempt_set",
                queryset=Attempt.objects.order_by("number")
                .select_related("node")
                .prefetch_related("artifacts"),
            )
        ),
        pk=job_id,
    )
    tasks = sorted(job.tasks.all(), key=lambda t: (t.index, t.replica, t.pk))
    attempts = [a for t in tasks for a in t.attempt_set.all()]
    # The job's cost is the sum of its attempts' settlements, as its webhook reports it.
    settlements = settlements_for_attempts(a.pk for a in attempts)
    artifacts = [
        artifact for a in attempts if a.state == "succeeded" for artifact in a.artifacts.all()
    ]
    logs = list(LogChunk.objects.filter(attempt__task__job=job).order_by("-id")[:LOG_CHUNKS_SHOWN])[
        ::-1
    ]
    ended = job.state in ENDED
    return JobView(
        job=job,
        percent=progress_percent(job),
        ended=ended,
        tasks=tasks,
        settlements={pk: s.charged_minor for pk, s in settlements.items()},
        cost_minor=sum(s.charged_minor for s in settlements.values()),
        artifacts=artifacts,
        logs=logs,
        reasons=[] if ended else placement_reasons(job),
    )


class JobPage(SubmitterPage, View):
    def get(self, request: HttpRequest, job_id: int) -> HttpResponse:
        return render(request, "web/jobs/detail.html", {"v": job_view(job_id, request)})


class JobLivePage(SubmitterPage, View):
    """The changing part of the job's page, fetched again every few seconds by
    web/static/web/job-live.js while the job runs."""

    def get(self, request: HttpRequest, job_id: int) -> HttpResponse:
        response = render(request, "web/jobs/_live.html", {"v": job_view(job_id, request)})
        response["Cache-Control"] = "no-store"
        return response


class JobCancelPage(SubmitterPage, View):
    http_method_names = ["post", "options"]

    def post(self, request: HttpRequest, job_id: int) -> HttpResponse:
        job = get_object_or_404(_own_jobs(request), pk=job_id)
        try:
            cancelled = job_cancel(job=job, actor=f"user:{request.user.pk}")
        except DomainError as exc:  # already ended: the service says so
            messages.error(request, str(exc))
            return redirect("web:job", job_id=job.pk)
        messages.success(
            request,
            f"Cancelled job {job.pk}: {cancelled.queued_cancelled} queued task(s) ended, "
            f"{cancelled.running_signalled} running one(s) asked to stop.",
        )
        return redirect("web:job", job_id=job.pk)


class JobZipPage(SubmitterPage, View):
    """Every output of the job's succeeded attempts, as one zip written while it is sent."""

    def get(self, request: HttpRequest, job_id: int) -> StreamingHttpResponse:
        job = get_object_or_404(_own_jobs(request), pk=job_id)
        chunks: Iterator[bytes] = job_zip_chunks(job)
        response = StreamingHttpResponse(chunks, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}.zip"'
        return response
