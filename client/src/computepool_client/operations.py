"""Every call this client makes to a hub, in one table.

Each is the method, the path template exactly as the hub's OpenAPI schema (`GET /api/v1/schema`)
spells it, and the schema's operationId, with the query parameters the client may send. The
tests check every row against the schema the hub generates, so a renamed route or parameter
fails there instead of at a user's desk."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    query: tuple[str, ...] = ()
    # Safe to send again when no answer came (a read, or a write made safe by an
    # Idempotency-Key); any request is sent again after a 429, which the hub did not process.
    retry_safe: bool = True

    def url_path(self, **params: int) -> str:
        return self.path.format(**{name: int(value) for name, value in params.items()})


JOB_SUBMIT = Operation("POST", "/api/v1/jobs/", "api_v1_jobs_create")
JOB_LIST = Operation(
    "GET",
    "/api/v1/jobs/",
    "api_v1_jobs_list",
    query=("state", "kind", "created_after", "created_before", "cursor", "page_size"),
)
JOB_GET = Operation("GET", "/api/v1/jobs/{job_id}", "api_v1_jobs_retrieve")
JOB_CANCEL = Operation(
    "POST", "/api/v1/jobs/{job_id}/cancel", "api_v1_jobs_cancel_create", retry_safe=False
)
JOB_LOGS = Operation(
    "GET",
    "/api/v1/jobs/{job_id}/logs",
    "api_v1_jobs_logs_list",
    query=("attempt", "stream", "cursor", "page_size"),
)
JOB_TIMELINE = Operation(
    "GET",
    "/api/v1/jobs/{job_id}/timeline",
    "api_v1_jobs_timeline_list",
    query=("cursor", "page_size"),
)
ARTIFACT_DOWNLOAD = Operation(
    "GET", "/api/v1/artifacts/{artifact_id}/download", "api_v1_artifacts_download_retrieve"
)
QUOTE = Operation(
    "GET",
    "/api/v1/quote",
    "api_v1_quote_retrieve",
    query=(
        "for",
        "tier",
        "region",
        "job_kind",
        "ceiling_per_s_minor",
        "timeout_s",
        "slices",
        "replicas",
        "expected_runtime_s",
    ),
)

OPERATIONS = (
    JOB_SUBMIT,
    JOB_LIST,
    JOB_GET,
    JOB_CANCEL,
    JOB_LOGS,
    JOB_TIMELINE,
    ARTIFACT_DOWNLOAD,
    QUOTE,
)
