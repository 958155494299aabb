"""Where job outputs are kept: the `artifacts` storage of STORAGES (computepool.settings), local
disk by default or a bucket of an S3-compatible store.

The hub reads an output only as a stream of blocks (never a whole file in memory, whatever its
size), and lets an S3 store serve downloads itself, through a URL signed for one owner's
request that expires in minutes (docs/decisions.md, "Downloads from S3 are redirects").
"""

from collections.abc import Iterator

from django.conf import settings
from django.core.files.storage import Storage, storages
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.functional import LazyObject, empty
from storages.backends.s3 import S3Storage

ALIAS = "artifacts"
READ_SIZE = 64 * 1024


class _ArtifactStorage(LazyObject):
    """The configured storage, looked up when first used (as Django's default_storage is), so
    that a FileField can name it while tests point STORAGES elsewhere."""

    def _setup(self) -> None:
        self._wrapped = storages[ALIAS]


artifact_store = _ArtifactStorage()


def artifact_storage() -> Storage:
    """The storage of Artifact.file (a callable, so migrations name it, not its settings)."""
    return artifact_store  # type: ignore[return-value]


@receiver(setting_changed)
def _storages_changed(*, setting: str, **kwargs: object) -> None:
    if setting == "STORAGES":
        artifact_store._wrapped = empty


def is_remote() -> bool:
    """Whether outputs live in an S3-compatible store, which serves their downloads itself."""
    return isinstance(artifact_store, S3Storage)


def signed_url(name: str, *, filename: str) -> str:
    """A URL of the S3 store that serves this one object, as an attachment named `filename`,
    for ARTIFACT_URL_EXPIRE_S seconds."""
    # An output's name is letters, digits and . _ - (jobs.serializers.ArtifactIn): nothing in
    # it needs quoting.
    return artifact_store.url(
        name,
        parameters={"ResponseContentDisposition": f'attachment; filename="{filename}"'},
        expire=settings.ARTIFACT_URL_EXPIRE_S,
    )


def read_blocks(name: str, size: int = READ_SIZE) -> Iterator[bytes]:
    """The stored file's bytes, a block at a time.

    From S3, straight from the response body: django-storages' file objects download the
    whole object into memory before the first read."""
    if is_remote():
        body = artifact_store.open(name, "rb").obj.get()["Body"]
        try:
            yield from body.iter_chunks(size)
        finally:
            body.close()
        return
    with artifact_store.open(name, "rb") as source:
        while block := source.read(size):
            yield block


def delete(name: str) -> None:
    """Remove a stored file; one already gone is not an error (a retried deletion)."""
    artifact_store.delete(name)
