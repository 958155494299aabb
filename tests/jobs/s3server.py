"""A real S3-compatible server over HTTP for the artifact storage tests: moto's server, in a
process of its own on a free port (MinIO's binary is not installable from PyPI; moto is, from
requirements/dev.txt). The hub's `artifacts` storage is pointed at a fresh bucket on it."""

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
import requests

from computepool.artifact_storage_settings import artifacts_storage

REGION = "us-east-1"
# moto accepts any credentials; they are still required for boto3 to sign its requests.
KEYS = {"access_key": "test-access-key", "secret_key": "test-secret-key"}


@dataclass(frozen=True)
class Bucket:
    endpoint: str
    name: str
    client: object  # a boto3 S3 client, to look at the bucket beside the hub

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.name)
        return [item["Key"] for item in listed.get("Contents", [])]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                requests.get(f"{endpoint}/moto-api/", timeout=1)
                break
            except requests.ConnectionError:
                assert server.poll() is None, "moto's server exited at start"
                time.sleep(0.1)
        else:
            pytest.fail(f"moto's server never answered on {endpoint}")
        yield endpoint
    finally:
        server.terminate()
        server.wait(30)


@pytest.fixture
def s3_bucket(s3_endpoint, settings) -> Bucket:
    """A new bucket, and the hub's artifacts stored in it (as ARTIFACT_STORAGE=s3 sets)."""
    name = f"outputs-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=KEYS["access_key"],
        aws_secret_access_key=KEYS["secret_key"],
    )
    client.create_bucket(Bucket=name)
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": artifacts_storage(
            kind="s3",
            bucket=name,
            endpoint_url=s3_endpoint,
            region=REGION,
            addressing_style="path",
            credentials=KEYS,
        ),
    }
    return Bucket(s3_endpoint, name, client)
