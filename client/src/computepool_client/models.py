"""The shapes the hub sends and takes, as typed dictionaries: what arrives is the hub's JSON,
unchanged, with names a type checker knows. `SCHEMAS` ties each to its component in the hub's
OpenAPI schema; the tests check that both have the same fields."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

JobState = Literal["queued", "leased", "running", "succeeded", "failed", "cancelled"]
ENDED: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


class Requirements(TypedDict, total=False):
    min_vram_mb: int
    cpu_cores: int
    ram_mb: int
    disk_mb: int
    gpu_count: int
    gpu_tiers: list[str]
    min_compute_capability: str | None
    region: str


class Verification(TypedDict):
    replicas: int
    quorum: int


class JobSubmit(TypedDict, total=False):
    """What `jobs.submit` takes: the fields of `POST /api/v1/jobs/`, except that `inputs` maps
    each file name to its content (bytes) or a path to read it from; the client encodes it."""

    name: str
    kind: Literal["script", "container"]
    image: str
    command: Sequence[str]
    script: str
    interpreter: Literal["sh", "python"]
    env: Mapping[str, str]
    inputs: Mapping[str, bytes | os.PathLike[str]]
    requirements: Requirements
    priority: int
    slices: int
    timeout_s: int
    max_attempts: int
    price_ceiling: int
    verification: Verification
    webhook_url: str
    retention_days: int


class Job(TypedDict):
    id: int
    name: str
    kind: str
    state: JobState
    priority: int
    slices: int
    timeout_s: int
    max_attempts: int
    price_ceiling: int
    max_cost: int
    verification: Verification | None
    tasks_succeeded: int
    tasks_failed: int
    tasks_cancelled: int
    requirements: Requirements
    created_at: str
    finished_at: str | None
    cancel_requested_at: str | None
    retention_days: int
    artifacts_expire_at: str | None  # when its outputs are deleted (set when it ends)
    artifacts_expired_at: str | None  # when they were


class Artifact(TypedDict):
    id: int
    name: str
    size: int
    sha256: str
    created_at: str
    deleted_at: str | None  # deleted by the job's retention: no longer downloadable


class Attempt(TypedDict):
    id: int
    number: int
    node_id: int
    state: str
    leased_at: str
    lease_expires_at: str
    finished_at: str | None
    runtime_ms: int | None
    price_per_s: int
    verdict: str
    exit_code: int | None
    failure_class: str
    detail: str
    progress: int
    message: str
    stdout_tail: str
    stderr_tail: str
    artifacts: list[Artifact]


class Task(TypedDict):
    id: int
    index: int
    replica: int
    state: str
    attempts: list[Attempt]
    available_at: str
    finished_at: str | None


class JobDetail(Job):
    spec: Any
    tasks: list[Task]


class LogChunk(TypedDict):
    id: int
    stream: Literal["stdout", "stderr"]
    seq: int
    data: str
    received_at: str


class TimelineEvent(TypedDict):
    id: int
    stream: str
    type: str
    payload: Any
    actor: str
    recorded_at: str


class JobQuote(TypedDict):
    tier: str
    region: str
    book_version: int
    spot_per_s_minor: int
    within_ceiling: bool
    max_minor: int
    expected_minor: int | None
    max_credits: str
    expected_credits: str | None
    measured_tflops: float | None
    cost_per_tflop_hour_minor: int | None
    cost_per_tflop_hour_credits: str | None


# Each shape and the component of the hub's schema it mirrors (the tests compare their fields).
SCHEMAS: dict[str, type] = {
    "JobInRequest": JobSubmit,
    "RequirementsInRequest": Requirements,
    "VerificationInRequest": Verification,
    "JobOut": Job,
    "JobDetailOut": JobDetail,
    "TaskOut": Task,
    "AttemptOut": Attempt,
    "ArtifactOut": Artifact,
    "LogChunkOut": LogChunk,
    "TimelineOut": TimelineEvent,
}
# The quote's answer has no component in the schema (it is one of two shapes): the tests compare
# JobQuote with the hub's serializer of it instead.
