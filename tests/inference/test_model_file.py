"""An agent downloads a catalog model's file from its hub: whole, or resumed from a byte
offset, with the sha256 to check it against; only a node that can hold the model may."""

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from inference.catalog import model_register
from inference.models import InferenceModel
from tests.jobs.conftest import online_node
from tests.nodes.conftest import gpu, register_node

pytestmark = pytest.mark.django_db

DATA = bytes(range(256)) * 5000  # 1.28 MB: more than one chunk of the response's stream


@pytest.fixture
def model(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path
    entry = InferenceModel(
        name="org/tiny:q4", quantization="F16", context_length=256, ram_mb=1024,
        file=SimpleUploadedFile("tiny.gguf", DATA),
    )  # fmt: skip
    return model_register(entry)


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_a_capable_node_downloads_the_whole_file_with_its_sha256(model, bob):
    _, agent = online_node(bob, ram_mb=64000)
    response = agent.get("/api/v1/agent/models/org/tiny:q4")
    assert response.status_code == 200
    assert _body(response) == DATA
    assert response["X-Model-Sha256"] == hashlib.sha256(DATA).hexdigest()
    assert response["Content-Length"] == str(len(DATA)) and response["Accept-Ranges"] == "bytes"


def test_a_download_resumes_from_a_byte_offset(model, bob):
    _, agent = online_node(bob, ram_mb=64000)
    tail = agent.get("/api/v1/agent/models/org/tiny:q4", HTTP_RANGE="bytes=1000000-")
    assert tail.status_code == 206
    assert tail["Content-Range"] == f"bytes 1000000-{len(DATA) - 1}/{len(DATA)}"
    assert _body(tail) == DATA[1000000:]
    middle = agent.get("/api/v1/agent/models/org/tiny:q4", HTTP_RANGE="bytes=10-19")
    assert middle.status_code == 206 and _body(middle) == DATA[10:20]


@pytest.mark.parametrize("header", ["bytes=2000000-", "bytes=5-1", "bytes=-10", "lines=1-2"])
def test_a_range_it_cannot_serve_is_416_with_the_size(model, bob, header):
    _, agent = online_node(bob, ram_mb=64000)
    response = agent.get("/api/v1/agent/models/org/tiny:q4", HTTP_RANGE=header)
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{len(DATA)}"


def test_only_an_agent_whose_node_can_hold_the_model_gets_it(model, bob, api, alice):
    _, small = online_node(bob, name="small", gpus=[gpu(vram_total_mb=4096)], ram_mb=1024)
    refused = small.get("/api/v1/agent/models/org/tiny:q4")
    assert refused.status_code == 403 and b"cannot hold" in refused.content
    assert api(alice, "submitter").get("/api/v1/agent/models/org/tiny:q4").status_code == 403
    _, agent = online_node(bob, name="big", ram_mb=64000)
    assert agent.get("/api/v1/agent/models/org/other").status_code == 404
    InferenceModel.objects.filter(pk=model.pk).update(enabled=False)
    assert agent.get("/api/v1/agent/models/org/tiny:q4").status_code == 404


def test_a_node_that_has_not_beaten_yet_gets_nothing(model, bob):
    from tests.conftest import client_with_key

    _, key = register_node(bob, name="new", ram_mb=64000)
    assert client_with_key(key).get("/api/v1/agent/models/org/tiny:q4").status_code == 403
