"""HTTP for jobs: thin views, one service each. Submitters see only their own jobs; agents act
only on attempts leased to their own node (request.auth is the node)."""

import threading
import time
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Prefetch
from django.http import FileResponse, HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.bodies import validated
from core.api.pagination import OldestFirstPagination
from core.api.permissions import IsSubmitter
from jobs import artifact_storage
from jobs import attempts as attempt_services
from jobs.claim import Lease, claim_current, task_claim
from jobs.errors import ArtifactExpired
from jobs.models import Artifact, Attempt, Job, JobKind, JobState, LogChunk
from jobs.node_profile import profile_for
from jobs.selectors import job_timeline, queue_backoff_ends
from jobs.serializers import (
    ArtifactIn,
    ArtifactOut,
    ClaimIn,
    CompleteIn,
    FailIn,
    HandBackIn,
    JobDetailOut,
    JobIn,
    JobOut,
    LogChunkOut,
    LogIn,
    ProgressIn,
    TimelineOut,
)
from jobs.submission import job_submit
from jobs.wakeup import waker
from ledger.models import Event
from nodes.auth import IsAgent

# --- submitters ---------------------------------------------------------------------------------


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    """Compared in UTC: PostgreSQL refuses offsets past ±15:59 that ISO 8601 allows."""

    def filter(self, qs, value):
        if value is not None and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError({self.field_name: ["out of range"]}) from None
        return super().filter(qs, value)


class JobFilter(filters.FilterSet):
    # Choices, not free text: ?state=bogus is a 400 naming the field, not an empty list.
    state = filters.ChoiceFilter(choices=JobState.choices)
    kind = filters.ChoiceFilter(choices=JobKind.choices)
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = ["state", "kind"]


class JobListCreateApi(generics.ListAPIView):
    """Your jobs, newest first; POST submits one (credits for the worst case are held)."""

    permission_classes = [IsSubmitter]
    serializer_class = JobOut
    filterset_class = JobFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Job.objects.none()
        return Job.objects.filter(submitter=self.request.user)

    def get_serializer_class(self):
        # The browsable API draws its POST form from the serializer of a POST: what a job
        # takes, not what one looks like once submitted.
        request = getattr(self, "request", None)
        return JobIn if request is not None and request.method == "POST" else JobOut

    @extend_schema(
        request=JobIn,
        responses={201: JobOut, 200: JobOut},
        parameters=[
            OpenApiParameter(
                "Idempotency-Key", str, OpenApiParameter.HEADER, description="Retry-safe submission"
            )
        ],
        summary="Submit a job",
    )
    def post(self, request: Request) -> Response:
        data = JobIn(data=request.data)
        data.is_valid(raise_exception=True)
        key = request.headers.get("Idempotency-Key") or None
        if key and len(key) > 200:
            return Response(
                {
                    "error": "invalid",
                    "detail": "Idempotency-Key is too long.",
                    "fields": {"Idempotency-Key": ["at most 200 characters"]},
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        submitted = job_submit(
            submitter_id=request.user.pk, data=data.validated_data, idempotency_key=key
        )
        code = status.HTTP_201_CREATED if submitted.created else status.HTTP_200_OK
        return Response(JobOut(submitted.job).data, status=code)


def _own_job(request: Request, job_id: int) -> Job:
    return generics.get_object_or_404(Job, pk=job_id, submitter=request.user)


class JobDetailApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(responses=JobDetailOut, summary="A job with its tasks and attempts")
    def get(self, request: Request, job_id: int) -> Response:
        job = generics.get_object_or_404(
            Job.objects.prefetch_related(
                Prefetch(
                    "tasks__attempt_set",
                    queryset=Attempt.objects.order_by("number").prefetch_related("artifacts"),
                )
            ),
            pk=job_id,
            submitter=request.user,
        )
        return Response(JobDetailOut(job).data)


class JobCancelApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(request=None, responses=JobOut, summary="Cancel a job")
    def post(self, request: Request, job_id: int) -> Response:
        from jobs.cancellation import job_cancel

        job = _own_job(request, job_id)
        job_cancel(job=job, actor=f"user:{request.user.pk}")
        job.refresh_from_db()
        return Response(JobOut(job).data)


class JobLogsApi(generics.ListAPIView):
    """Log chunks of a job's attempts, in the order they were received (oldest first)."""

    permission_classes = [IsSubmitter]
    serializer_class = LogChunkOut
    pagination_class = OldestFirstPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("attempt", int),
            OpenApiParameter("stream", str),
        ]
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return LogChunk.objects.none()
        job = _own_job(self.request, self.kwargs["job_id"])
        chunks = LogChunk.objects.filter(attempt__task__job=job)
        if attempt := self.request.query_params.get("attempt"):
            # More than 18 digits is no id, and could overflow a bigint.
            if not (attempt.isascii() and attempt.isdigit()) or len(attempt) > 18:
                return LogChunk.objects.none()
            chunks = chunks.filter(attempt_id=int(attempt))
        if stream := self.request.query_params.get("stream"):
            known = stream in ("stdout", "stderr")  # anything else (a NUL byte) matches nothing
            chunks = chunks.filter(stream=stream) if known else LogChunk.objects.none()
        return chunks


class JobTimelineApi(generics.ListAPIView):
    """The job's history, read from the event log (the job's stream and its tasks')."""

    permission_classes = [IsSubmitter]
    serializer_class = TimelineOut

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Event.objects.none()
        return job_timeline(_own_job(self.request, self.kwargs["job_id"]))


class ArtifactDownloadApi(APIView):
    permission_classes = [IsSubmitter]

    @extend_schema(
        responses={
            (200, "application/octet-stream"): bytes,
            302: OpenApiResponse(description="S3 storage: a short-lived signed URL of the file"),
            410: OpenApiResponse(description="Deleted when the job's retention ran out"),
        },
        summary="Download an output file of your job",
    )
    def get(self, request: Request, artifact_id: int) -> HttpResponse:
        artifact = generics.get_object_or_404(
            Artifact.objects.select_related("attempt__task__job"),
            pk=artifact_id,
            attempt__task__job__submitter=request.user,
        )
        if artifact.deleted_at is not None:
            job = artifact.attempt.task.job
            raise ArtifactExpired(
                f"{artifact.name} was deleted on {artifact.deleted_at:%Y-%m-%d}, "
                f"{job.retention_days} days after job {job.pk} ended (its retention)"
            )
        if artifact_storage.is_remote():
            # The store serves the bytes; the hub only signs a URL for this owner's request.
            response = HttpResponseRedirect(
                artifact_storage.signed_url(artifact.file.name, filename=artifact.name)
            )
        else:
            # Streamed a block at a time from the open file, never read whole.
            response = FileResponse(
                artifact.file.open("rb"), as_attachment=True, filename=artifact.name
            )
        response["X-Checksum-Sha256"] = artifact.sha256
        response["Cache-Control"] = "private, no-store"
        return response


# --- agents -------------------------------------------------------------------------------------


def _lease_body(lease: Lease | None) -> dict | None:
    return lease.as_payload() if lease else None


_PAST_BACKOFF_S = 0.002


def _fit_delay_s(fit: float) -> float:
    """When work arrives, better nodes try first: a 4090 (3.0) at once, a CPU node (0.8) 44 ms
    later, so the best-fitting idle node wins a tie without a central dispatcher."""
    return max(0.0, 3.0 - fit) * 0.02


class _BackoffEnd:
    """The earliest backoff end as this process last read it, and the work generation
    (jobs.wakeup) it was read in.

    Every woken claim that finds nothing asks when the next backoff ends, and a wake-up wakes
    every waiting claim of the process: asked of the database each time, the read cost about as
    much as the claim. Every requeue publishes a wake-up, which moves the generation, so within
    one generation the answer changes only by passing: it is read once per generation, and again
    once the end it gave is past. A wake-up lost with Redis costs a waiter no more than it does
    for the work itself (it sleeps until its wait ends). The claims a wake-up woke ask at once, so
    the read is under a lock: the first reads, the others wait for its answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: tuple[int, datetime | None] | None = None  # (generation, end)

    def after(self, now: datetime, generation: int) -> datetime | None:
        with self._lock:
            read = self._read
            if read is not None and read[0] == generation and (read[1] is None or read[1] > now):
                return read[1]
            ends = queue_backoff_ends(after=now)
            self._read = (generation, ends)
            return ends


_backoff_end = _BackoffEnd()


def _until_backoff_ends(generation: int) -> float:
    now = timezone.now()
    ends = _backoff_end.after(now, generation)
    if ends is None:
        return float("inf")
    # A hair past the end, so that the claim's own clock finds the task claimable.
    return (ends - now).total_seconds() + _PAST_BACKOFF_S


def claim_with_wait(node, wait: float) -> Lease | None:
    """Claim; with nothing to take, wait up to `wait` seconds for work and claim again. Each
    claim takes the node as it is then (jobs.claim.claim_current), and a node that stops
    taking work (a drain) ends its waiting claims at once (jobs.wakeup)."""
    deadline = time.monotonic() + wait
    profile = profile_for(node)
    while True:
        seen = waker.mark(profile.node_id)
        lease, profile = claim_current(profile)
        remaining = deadline - time.monotonic()
        if lease is not None or remaining <= 0 or not profile.can_claim:
            return lease
        # A requeued task's wake-up was published when it was requeued, before its backoff
        # ended, and none comes when it ends: wake by then to claim it.
        remaining = min(remaining, _until_backoff_ends(seen.generation))
        # Hand the connection back while waiting: idle agents must not pin connections.
        connection.close()
        waker.wait(seen, profile.node_id, remaining)
        if time.monotonic() < deadline:
            time.sleep(min(_fit_delay_s(profile.fit), max(0.0, deadline - time.monotonic())))


class ClaimApi(APIView):
    permission_classes = [IsAgent]

    @extend_schema(
        request=ClaimIn,
        responses={200: dict, 204: None},
        summary="Lease the next task this node can run (long-poll with wait)",
    )
    def post(self, request: Request) -> Response:
        wait = validated(ClaimIn, request.data)["wait"]
        lease = claim_with_wait(request.auth, wait)
        if lease is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(lease.as_payload())


class _AttemptApi(APIView):
    permission_classes = [IsAgent]
    serializer_class = ProgressIn

    def _valid(self, request: Request) -> dict:
        return validated(self.serializer_class, request.data)


class ProgressApi(_AttemptApi):
    @extend_schema(request=ProgressIn, responses={200: dict}, summary="Report progress")
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        attempt_services.attempt_progress(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            progress=d["progress"],
            message=d["message"],
        )
        return Response({"status": "ok"})


class LogApi(_AttemptApi):
    serializer_class = LogIn

    @extend_schema(request=LogIn, responses={200: dict}, summary="Append a log chunk")
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        stored = attempt_services.attempt_log(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            stream=d["stream"],
            seq=d["seq"],
            data=d["data"],
        )
        return Response({"status": "ok" if stored else "duplicate"})


class ArtifactApi(_AttemptApi):
    serializer_class = ArtifactIn
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": ArtifactIn},
        responses={201: ArtifactOut},
        summary="Upload an output file with its sha256",
    )
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        artifact = attempt_services.attempt_artifact(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            name=d["name"],
            sha256=d["sha256"],
            upload=d["file"],
        )
        return Response(ArtifactOut(artifact).data, status=status.HTTP_201_CREATED)


class CompleteApi(_AttemptApi):
    serializer_class = CompleteIn

    @extend_schema(
        request=CompleteIn,
        responses={200: dict},
        summary="Report success; may lease the next task for the same slot",
    )
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        outcome = attempt_services.attempt_complete(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            exit_code=d["exit_code"],
            stdout_tail=d["stdout_tail"],
            stderr_tail=d["stderr_tail"],
            artifacts=d["artifacts"],
            reported_runtime_s=d["reported_runtime_s"],
        )
        following = task_claim(profile=profile_for(request.auth)) if d["want_next"] else None
        return Response(
            {
                "status": outcome.task_state,
                "runtime_ms": outcome.runtime_ms,
                "next": _lease_body(following),
            }
        )


class FailApi(_AttemptApi):
    serializer_class = FailIn

    @extend_schema(request=FailIn, responses={200: dict}, summary="Report a failure")
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        outcome = attempt_services.attempt_fail(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            failure_class=d["failure_class"],
            exit_code=d["exit_code"],
            detail=d["detail"],
            stdout_tail=d["stdout_tail"],
            stderr_tail=d["stderr_tail"],
            reason=d["reason"],
        )
        return Response({"status": outcome.task_state, "runtime_ms": outcome.runtime_ms})


class HandBackApi(_AttemptApi):
    serializer_class = HandBackIn

    @extend_schema(
        request=HandBackIn,
        responses={200: dict},
        summary="Give the attempt back unfinished (the machine's owner wants it): requeued now",
    )
    def post(self, request: Request, attempt_id: int) -> Response:
        d = self._valid(request)
        state = attempt_services.attempt_hand_back(
            attempt_id=attempt_id,
            token=d["lease_token"],
            node_id=request.auth.pk,
            reason=d["reason"],
        )
        return Response({"status": state})
