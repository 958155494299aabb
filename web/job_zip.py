"""All of a job's outputs as one zip, written while it is sent: the hub never holds the whole
archive, nor a whole output, in memory or on disk (each is read a block at a time, from disk or
from the S3 store: jobs.artifact_storage). Each file sits under its slice (and replica), next to
a SHA256SUMS that lists the checksums the agent reported and the hub verified on upload."""

import zipfile
from collections.abc import Iterator

from jobs.artifact_storage import read_blocks
from jobs.models import Artifact, AttemptState, Job


class _Pipe:
    """A write-only, unseekable file for ZipFile: what it is given waits in `pending` until the
    generator hands it on (zipfile then writes data descriptors instead of seeking back)."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []
        self.offset = 0

    def write(self, data: bytes) -> int:
        self.pending.append(bytes(data))
        self.offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self.offset

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.pending = b"".join(self.pending), []
        return data


def artifact_path(artifact: Artifact) -> str:
    task = artifact.attempt.task
    folder = f"slice-{task.index}"
    if task.replica:
        folder += f"/replica-{task.replica}"
    return f"{folder}/{artifact.name}"


def job_artifacts(job: Job) -> list[Artifact]:
    """The outputs of the job's succeeded attempts still kept, by slice, replica, then name."""
    return list(
        Artifact.objects.filter(
            attempt__task__job=job, attempt__state=AttemptState.SUCCEEDED, deleted_at__isnull=True
        )
        .select_related("attempt__task")
        .order_by("attempt__task__index", "attempt__task__replica", "name")
    )


def job_zip_chunks(job: Job) -> Iterator[bytes]:
    artifacts = job_artifacts(job)
    pipe = _Pipe()
    sums = []
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for artifact in artifacts:
            path = artifact_path(artifact)
            sums.append(f"{artifact.sha256}  {path}\n")
            with archive.open(path, "w") as target:
                for block in read_blocks(artifact.file.name):
                    target.write(block)
                    yield pipe.take()
            yield pipe.take()
        archive.writestr("SHA256SUMS", "".join(sums))
    yield pipe.take()
