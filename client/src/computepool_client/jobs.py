"""`client.jobs`: submit, watch, follow, cancel and download, each through one row of
operations.OPERATIONS."""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack, cast
from urllib.parse import parse_qs, urlsplit

from computepool_client import operations as ops
from computepool_client.errors import ChecksumMismatch, HubUnavailable, WaitTimeout
from computepool_client.models import (
    ENDED,
    Artifact,
    Job,
    JobDetail,
    JobSubmit,
    LogChunk,
    TimelineEvent,
)
from computepool_client.transport import Transport

JobRef = int | Mapping[str, Any]
CHUNK_BYTES = 256 * 1024
# The most the hub gives in one page (core.api.pagination).
MAX_PAGE = 200


@dataclass(frozen=True)
class Progress:
    """How far a job is: tasks ended of all its tasks, and the mean of its tasks' progress (an
    ended task counts 100, a running one what its script last printed as `CP_PROGRESS`)."""

    state: str
    done: int
    total: int
    percent: int


@dataclass(frozen=True)
class Output:
    """One file a job produced, and where `download` puts it under the directory given."""

    task_index: int
    artifact: Artifact
    relative_path: Path


def job_id(job: JobRef) -> int:
    return int(job if isinstance(job, int) else job["id"])


def progress_of(job: JobDetail) -> Progress:
    tasks = job["tasks"]
    done = sum(1 for task in tasks if task["state"] in ENDED)
    if not tasks:
        return Progress(job["state"], 0, 0, 100 if job["state"] in ENDED else 0)
    shares = []
    for task in tasks:
        running = task["attempts"][-1]["progress"] if task["attempts"] else 0
        shares.append(100 if task["state"] in ENDED else running)
    return Progress(job["state"], done, len(tasks), sum(shares) // len(tasks))


def outputs_of(job: JobDetail) -> list[Output]:
    """The files of the job's succeeded attempts, one result per slice (of a verified slice's
    replicas, the first that was not rejected), by slice then name. A file lands at its own name,
    or under `slice-<index>/` when more than one slice wrote that name."""
    chosen: dict[int, list[Artifact]] = {}
    for task in sorted(job["tasks"], key=lambda t: (t["index"], t["replica"])):
        if task["index"] in chosen:
            continue
        for attempt in task["attempts"]:
            if attempt["state"] == "succeeded" and attempt["verdict"] != "rejected":
                chosen[task["index"]] = sorted(attempt["artifacts"], key=lambda a: a["name"])
                break
    names = [a["name"] for artifacts in chosen.values() for a in artifacts]
    shared = {name for name in names if names.count(name) > 1}
    out = []
    for index, artifacts in sorted(chosen.items()):
        for artifact in artifacts:
            name = artifact["name"]
            if Path(name).name != name or name in ("", ".", ".."):
                # Never a path: a name like "../x" would write outside the folder asked for.
                raise HubUnavailable(f"the hub named an output {name!r}, which is not a file name")
            where = Path(f"slice-{index}", name) if name in shared else Path(name)
            out.append(Output(index, artifact, where))
    return out


class Jobs:
    def __init__(self, transport: Transport, *, page_size: int = MAX_PAGE) -> None:
        self._http = transport
        self._page_size = min(page_size, MAX_PAGE)

    def submit(self, *, idempotency_key: str | None = None, **spec: Unpack[JobSubmit]) -> Job:
        """Submit a job; the hub holds its worst-case cost. The request always carries an
        Idempotency-Key (a fresh one unless given), so a retry after a lost answer returns the
        same job instead of submitting a second."""
        body: dict[str, Any] = dict(spec)
        if "inputs" in spec:
            body["inputs"] = {name: _base64(v) for name, v in spec["inputs"].items()}
        if "command" in spec:
            body["command"] = list(spec["command"])
        key = idempotency_key or f"computepool-client-{uuid.uuid4()}"
        response = self._http.call(ops.JOB_SUBMIT, body=body, headers={"Idempotency-Key": key})
        return cast(Job, response.json())

    def get(self, job: JobRef) -> JobDetail:
        """The job with its tasks, their attempts and each attempt's output files."""
        response = self._http.call(ops.JOB_GET, path_params={"job_id": job_id(job)})
        return cast(JobDetail, response.json())

    def cancel(self, job: JobRef) -> Job:
        response = self._http.call(ops.JOB_CANCEL, path_params={"job_id": job_id(job)})
        return cast(Job, response.json())

    def timeline(self, job: JobRef) -> list[TimelineEvent]:
        """The job's events, oldest first."""
        events = self._pages(
            ops.JOB_TIMELINE, {"job_id": job_id(job)}, {"page_size": self._page_size}
        )
        return sorted((cast(TimelineEvent, e) for e in events), key=lambda e: e["id"])

    def wait(
        self,
        job: JobRef,
        *,
        timeout: float | None = None,
        interval: float = 1.0,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> JobDetail:
        """Poll until the job has ended (succeeded, failed or cancelled) and return it; it does
        not raise for a failed job: look at `state`. WaitTimeout after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            detail = self.get(job)
            if on_progress is not None:
                on_progress(progress_of(detail))
            if detail["state"] in ENDED:
                return detail
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {detail['id']} is still {detail['state']}")
            time.sleep(interval)

    def logs(
        self,
        job: JobRef,
        *,
        follow: bool = False,
        attempt: int | None = None,
        stream: str | None = None,
        interval: float = 1.0,
    ) -> Iterator[LogChunk]:
        """The job's log chunks, oldest first. With `follow`, new chunks as they arrive until
        the job has ended and its last chunk was read."""
        ident = job_id(job)
        query: dict[str, Any] = {"attempt": attempt, "stream": stream, "page_size": self._page_size}
        cursor: str | None = None  # of the page read last: read again, it holds what came since
        seen = 0
        ended = False
        while True:
            while True:
                page = self._http.call(
                    ops.JOB_LOGS, path_params={"job_id": ident}, query={**query, "cursor": cursor}
                ).json()
                for chunk in page["results"]:
                    if chunk["id"] > seen:
                        seen = chunk["id"]
                        yield cast(LogChunk, chunk)
                following = _cursor(page.get("next"))
                if following is None:
                    break
                cursor = following
            if not follow or ended:
                return
            # Read once more after the end: chunks sent just before it are then in.
            ended = self.get(ident)["state"] in ENDED
            if not ended:
                time.sleep(interval)

    def download(
        self,
        job: JobRef,
        directory: str | os.PathLike[str],
        *,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> list[Path]:
        """Write the job's output files under `directory` (see `outputs_of` for where), each
        streamed to disk and kept only if its sha256 is the one the hub recorded. A file already
        there with that checksum is not fetched again. `on_progress(bytes_done, bytes_total)`."""
        root = Path(directory)
        wanted = outputs_of(self.get(job))
        total = sum(o.artifact["size"] for o in wanted)
        done = 0
        paths = []
        for output in wanted:
            path = root / output.relative_path
            if not (path.is_file() and _sha256(path) == output.artifact["sha256"].lower()):
                before = done

                def received(n: int, before: int = before) -> None:
                    _report(on_progress, before + n, total)

                self._fetch(output.artifact, path, received)
            done += output.artifact["size"]
            _report(on_progress, done, total)
            paths.append(path)
        return paths

    def list(
        self, *, state: str | None = None, kind: str | None = None, limit: int = 50
    ) -> list[Job]:
        """Your jobs, newest first, at most `limit`."""
        query = {"state": state, "kind": kind, "page_size": min(limit, self._page_size)}
        jobs: list[Job] = []
        for job in self._pages(ops.JOB_LIST, {}, query):
            jobs.append(cast(Job, job))
            if len(jobs) >= limit:
                break
        return jobs

    def _fetch(self, artifact: Artifact, path: Path, on_bytes: Callable[[int], None]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.part")
        digest = hashlib.sha256()
        received = 0
        with self._http.call(
            ops.ARTIFACT_DOWNLOAD, path_params={"artifact_id": artifact["id"]}, stream=True
        ) as response:
            claimed = response.headers.get("X-Checksum-Sha256", artifact["sha256"]).lower()
            with partial.open("wb") as out:
                for block in response.iter_content(CHUNK_BYTES):
                    out.write(block)
                    digest.update(block)
                    received += len(block)
                    on_bytes(received)
        got = digest.hexdigest()
        if got != artifact["sha256"].lower() or got != claimed:
            partial.unlink()
            raise ChecksumMismatch(
                f"{artifact['name']} (artifact {artifact['id']}): sha256 {got}, "
                f"the hub recorded {artifact['sha256']}"
            )
        partial.replace(path)

    def _pages(
        self, operation: ops.Operation, path_params: Mapping[str, int], query: Mapping[str, Any]
    ) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = self._http.call(
                operation, path_params=path_params, query={**query, "cursor": cursor}
            ).json()
            yield from page["results"]
            cursor = _cursor(page.get("next"))
            if cursor is None:
                return


def _cursor(next_url: str | None) -> str | None:
    """The `cursor` of a page's `next` link. Only the cursor is kept: the link's host is the one
    the hub saw, which behind a proxy need not be the one this client reaches it by."""
    if not next_url:
        return None
    values = parse_qs(urlsplit(next_url).query).get("cursor")
    return values[0] if values else None


def _base64(content: bytes | os.PathLike[str]) -> str:
    data = content if isinstance(content, bytes) else Path(content).read_bytes()
    return base64.b64encode(data).decode("ascii")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def _report(on_progress: Callable[[int, int], None] | None, done: int, total: int) -> None:
    if on_progress is not None:
        on_progress(done, total)
