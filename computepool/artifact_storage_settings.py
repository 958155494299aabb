"""The `artifacts` entry of STORAGES, built from its settings: by computepool.settings from the
environment, and by the tests for their own S3-compatible server, so both run one configuration."""

from typing import Any


def artifacts_storage(
    *,
    kind: str,
    bucket: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    addressing_style: str = "auto",
    prefix: str = "",
    credentials: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`kind` local: files under MEDIA_ROOT. `kind` s3: objects in `bucket` of the store at
    `endpoint_url` (unset: AWS itself), with boto3's usual credentials unless given."""
    if kind == "local":
        return {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": endpoint_url,
            "region_name": region,
            "addressing_style": addressing_style,
            "location": prefix,
            "signature_version": "s3v4",
            # Objects stay private: the only way in is a URL the hub signed for their owner.
            "default_acl": None,
            "file_overwrite": False,
            **(credentials or {}),
        },
    }
