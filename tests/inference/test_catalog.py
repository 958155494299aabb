"""The model catalog: registering a model's file, and /v1/models listing what the pool can
serve now (an online node with room for it and the headroom)."""

import hashlib

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction

from inference.catalog import ModelFileRejected, capable_nodes, model_register, servable_models
from inference.models import InferenceModel
from tests.inference.conftest import price_tokens
from tests.jobs.conftest import online_node
from tests.nodes.conftest import gpu, register_node

pytestmark = pytest.mark.django_db

GGUF = b"GGUF" + bytes(range(256)) * 64  # stands in for a file: the catalog only hashes it


def _model(name="tiny", **fields):
    fields = {"quantization": "F16", "context_length": 256, "ram_mb": 1024, **fields}
    if "path" not in fields:
        fields.setdefault("file", SimpleUploadedFile("tiny.gguf", GGUF))
    return InferenceModel(name=name, **fields)


@pytest.fixture
def models_dir(tmp_path, settings):
    settings.INFERENCE_MODELS_DIR = tmp_path
    settings.MEDIA_ROOT = tmp_path / "media"
    return tmp_path


def test_an_uploaded_file_is_hashed_and_sized_by_the_hub(models_dir):
    model = model_register(_model())
    model.refresh_from_db()
    assert model.sha256 == hashlib.sha256(GGUF).hexdigest()
    assert model.size_bytes == len(GGUF)
    assert model.file.read() == GGUF


def test_a_sha256_given_must_match_the_file(models_dir):
    with pytest.raises(ModelFileRejected, match="sha256"):
        model_register(_model(), expected_sha256="0" * 64)
    assert not InferenceModel.objects.exists()
    right = hashlib.sha256(GGUF).hexdigest().upper()
    assert model_register(_model(), expected_sha256=right).sha256 == right.lower()


def test_a_path_must_name_a_file_under_the_models_directory(models_dir):
    (models_dir / "org").mkdir()
    (models_dir / "org" / "tiny.gguf").write_bytes(GGUF)
    model = model_register(_model(path="org/tiny.gguf"))
    assert (model.sha256, model.size_bytes) == (hashlib.sha256(GGUF).hexdigest(), len(GGUF))
    with pytest.raises(ModelFileRejected, match="no file"):
        model_register(_model("other", path="org/missing.gguf"))
    for bad in ("../tiny.gguf", "/etc/tiny.gguf", "org/.hidden.gguf", "tiny.bin"):
        with pytest.raises(ValidationError, match="relative path"):
            model_register(_model("bad", path=bad))


def test_the_database_holds_one_source_and_somewhere_to_run(models_dir):
    model_register(_model())
    for change in ({"path": "x.gguf"}, {"file": ""}, {"ram_mb": 0, "vram_mb": 0}):
        with pytest.raises(IntegrityError), transaction.atomic():
            InferenceModel.objects.filter(name="tiny").update(**change)


def test_names_are_what_clients_send(models_dir):
    model_register(_model("TinyLlama-1.1B-chat:q4/v1.0"))
    for bad in ("", "-x", "a b", "x" * 101, "naïve"):
        with pytest.raises(ValidationError, match=r"letters, digits|cannot be blank"):
            model_register(_model(bad))
    assert list(InferenceModel.objects.values_list("name", flat=True)) == [
        "TinyLlama-1.1B-chat:q4/v1.0"
    ]


def test_a_model_is_servable_when_an_online_node_has_room_and_headroom(models_dir, bob):
    cpu_model = model_register(_model("on-cpu", ram_mb=2048))
    gpu_model = model_register(_model("on-gpu", ram_mb=0, vram_mb=8000))
    price_tokens({"on-cpu": (100, 300), "on-gpu": (100, 300)})
    assert list(servable_models()) == []
    # 8192 MB of VRAM is not 8000 + 512; 64000 MB of memory is room for the CPU model.
    node, _ = online_node(bob, gpus=[gpu(vram_total_mb=8192)], ram_mb=64000)
    assert [m.name for m in servable_models()] == ["on-cpu"]
    assert list(capable_nodes(gpu_model)) == []
    big, _ = online_node(bob, name="rig-2", gpus=[gpu(vram_total_mb=8512)], ram_mb=1000)
    assert [m.name for m in servable_models()] == ["on-cpu", "on-gpu"]
    assert list(capable_nodes(gpu_model)) == [big]
    assert set(capable_nodes(cpu_model)) == {node}
    InferenceModel.objects.filter(name="on-cpu").update(enabled=False)
    assert [m.name for m in servable_models()] == ["on-gpu"]


def test_a_registered_node_that_never_beat_serves_nothing(models_dir, bob):
    model_register(_model())
    price_tokens({"tiny": (100, 300)})
    register_node(bob, ram_mb=64000)  # offline until its first heartbeat
    assert list(servable_models()) == []


def test_v1_models_lists_what_can_be_served_in_openais_shape(models_dir, api, alice, bob):
    model_register(_model("tiny", context_length=512))
    model_register(_model("huge", ram_mb=10**6))
    model_register(_model("unpriced"))
    price_tokens({"tiny": (100, 300), "huge": (100, 300)})
    online_node(bob, ram_mb=64000)
    response = api(alice, "submitter").get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["tiny"]
    entry = body["data"][0]
    assert entry["object"] == "model" and entry["owned_by"] == "computepool"
    assert isinstance(entry["created"], int) and entry["context_length"] == 512


def test_v1_answers_a_missing_or_wrong_key_in_openais_error_shape(models_dir, api, bob, client):
    for response, status in (
        (client.get("/v1/models"), 401),
        (client.get("/v1/models", HTTP_AUTHORIZATION="Bearer cpk_not-a-key"), 401),
        (api(bob, "operator").get("/v1/models"), 403),
    ):
        assert response.status_code == status
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error" and error["message"]
    assert client.get("/v1/models").json()["error"]["code"] == "invalid_api_key"


def test_an_admin_registers_a_model_by_upload_and_is_told_of_a_wrong_sha256(
    models_dir, client, dave
):
    client.force_login(dave)
    url = "/admin/inference/inferencemodel/add/"
    form = {
        "name": "tiny", "quantization": "F16", "context_length": "256", "vram_mb": "0",
        "ram_mb": "1024", "enabled": "on", "path": "",
    }  # fmt: skip
    wrong = client.post(
        url, {**form, "file": SimpleUploadedFile("t.gguf", GGUF), "expected_sha256": "0" * 64}
    )
    assert wrong.status_code == 200 and b"not the 000" in wrong.content
    neither = client.post(url, form)
    assert neither.status_code == 200 and b"upload it, or name its path" in neither.content
    assert not InferenceModel.objects.exists()
    done = client.post(url, {**form, "file": SimpleUploadedFile("t.gguf", GGUF)})
    assert done.status_code == 302
    assert InferenceModel.objects.get().sha256 == hashlib.sha256(GGUF).hexdigest()
