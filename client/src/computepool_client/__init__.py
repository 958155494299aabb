"""The ComputePool client: `Client(hub, key).jobs.submit(…)`, `.wait(job)`, `.logs(job,
follow=True)`, `.download(job, directory)`. It speaks the hub's HTTP API only (docs/client.md)."""

from computepool_client.client import Client, client_version
from computepool_client.errors import (
    ChecksumMismatch,
    ComputePoolError,
    HubError,
    HubUnavailable,
    JobFileError,
    WaitTimeout,
)
from computepool_client.jobs import Output, Progress, outputs_of, progress_of
from computepool_client.models import (
    Artifact,
    Attempt,
    Job,
    JobDetail,
    JobQuote,
    JobSubmit,
    LogChunk,
    Task,
    TimelineEvent,
)

__all__ = [
    "Artifact",
    "Attempt",
    "ChecksumMismatch",
    "Client",
    "ComputePoolError",
    "HubError",
    "HubUnavailable",
    "Job",
    "JobDetail",
    "JobFileError",
    "JobQuote",
    "JobSubmit",
    "LogChunk",
    "Output",
    "Progress",
    "Task",
    "TimelineEvent",
    "WaitTimeout",
    "client_version",
    "outputs_of",
    "progress_of",
]
