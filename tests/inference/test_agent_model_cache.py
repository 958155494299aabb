"""The agent's model cache against a real hub (Django's live server on 127.0.0.1): a model is
fetched on first need, resumed after a break, checked against its sha256, and the least
recently used model makes room under the budget."""

import hashlib
import os
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.client import HubClient
from agent.model_cache import ModelCache, ModelCacheError
from inference.catalog import model_register
from inference.models import InferenceModel
from tests.nodes.conftest import register_node

DATA = os.urandom(3 * 1024 * 1024 + 17)  # several chunks
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def hub(live_server, transactional_db, tmp_path, settings):
    """The live hub's URL, its catalog holding the model."""
    settings.MEDIA_ROOT = tmp_path / "media"
    model_register(
        InferenceModel(
            name="org/tiny:q4", quantization="F16", context_length=256, ram_mb=1024,
            file=SimpleUploadedFile("tiny.gguf", DATA),
        )
    )  # fmt: skip
    return live_server.url


@pytest.fixture
def agent(hub, bob):
    """The hub client of an online node that can hold the model. Closed after the test: an open
    keep-alive connection would keep the live server's thread, and its database session, alive
    past the test."""
    from tests.conftest import client_with_key
    from tests.nodes.conftest import beat

    _, key = register_node(bob, ram_mb=64000)
    assert beat(client_with_key(key)).status_code == 200
    client = HubClient(hub, key)
    yield client
    client.close()


class Counting:
    """The hub client, counting the bytes it receives (what a resume saves)."""

    def __init__(self, client: HubClient) -> None:
        self.client, self.received, self.offsets = client, 0, []

    def model_download(self, name, dest, *, offset=0):
        start = dest.tell()
        self.offsets.append(offset)
        try:
            return self.client.model_download(name, dest, offset=offset)
        finally:
            self.received += dest.tell() - start


def test_a_model_is_fetched_once_checked_and_then_found_on_disk(agent, tmp_path):
    cache = ModelCache(tmp_path / "cache", budget_bytes=10 * len(DATA))
    fetcher = Counting(agent)
    path = cache.ensure("org/tiny:q4", fetcher)
    assert path.read_bytes() == DATA and path.name == f"{SHA}.gguf"
    assert cache.ensure("org/tiny:q4", fetcher, sha256=SHA) == path
    assert fetcher.received == len(DATA)  # the second call read nothing
    assert [m.sha256 for m in cache.cached()] == [SHA]


def test_a_broken_download_resumes_where_it_stopped(agent, tmp_path):
    cache = ModelCache(tmp_path / "cache", budget_bytes=10 * len(DATA))
    part = cache.root / f"{hashlib.sha256(b'org/tiny:q4').hexdigest()[:32]}.part"
    part.write_bytes(DATA[:1_000_000])  # what a first, broken download left
    fetcher = Counting(agent)
    assert cache.ensure("org/tiny:q4", fetcher).read_bytes() == DATA
    assert fetcher.offsets == [1_000_000]
    assert fetcher.received == len(DATA) - 1_000_000
    assert not part.exists()


def test_a_damaged_part_is_fetched_again_and_a_wrong_sha256_is_refused(agent, tmp_path):
    cache = ModelCache(tmp_path / "cache", budget_bytes=10 * len(DATA))
    part = cache.root / f"{hashlib.sha256(b'org/tiny:q4').hexdigest()[:32]}.part"
    part.write_bytes(b"\0" * 1000)  # not the file's first bytes
    fetcher = Counting(agent)
    assert cache.ensure("org/tiny:q4", fetcher).read_bytes() == DATA
    assert fetcher.offsets == [1000, 0]
    other = ModelCache(tmp_path / "other", budget_bytes=10 * len(DATA))
    with pytest.raises(ModelCacheError, match="states sha256"):
        other.ensure("org/tiny:q4", fetcher, sha256="0" * 64)
    assert other.cached() == [] and list(other.root.iterdir()) == []


def test_the_least_recently_used_model_makes_room(agent, tmp_path):
    cache = ModelCache(tmp_path / "cache", budget_bytes=len(DATA) + 1_500_000)
    old, recent = cache.root / f"{'a' * 64}.gguf", cache.root / f"{'b' * 64}.gguf"
    old.write_bytes(b"x" * 1_000_000)
    recent.write_bytes(b"y" * 1_000_000)
    now = time.time()
    os.utime(old, (now - 100, now - 100))
    os.utime(recent, (now - 10, now - 10))
    cache.ensure("org/tiny:q4", agent)
    assert not old.exists() and recent.exists()
    assert cache.used_bytes() <= cache.budget_bytes


def test_a_model_larger_than_the_budget_is_refused(agent, tmp_path):
    cache = ModelCache(tmp_path / "cache", budget_bytes=1000)
    with pytest.raises(ModelCacheError, match="larger than the cache's budget"):
        cache.ensure("org/tiny:q4", agent)
    assert list(cache.root.iterdir()) == []
