"""The official `openai` package against a real hub (Django's live server): what a user of
the /v1 routes runs. It lists the models and raises its own errors for a bad key or role."""

import openai
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from inference.catalog import model_register
from inference.models import InferenceModel
from tests.conftest import key_for
from tests.inference.conftest import price_tokens
from tests.jobs.conftest import online_node


@pytest.fixture
def base_url(live_server, transactional_db, tmp_path, settings, bob):
    settings.MEDIA_ROOT = tmp_path
    for name in ("tiny", "unpriced"):
        model_register(
            InferenceModel(
                name=name, quantization="F16", context_length=512, ram_mb=1024,
                file=SimpleUploadedFile(f"{name}.gguf", b"GGUF" + name.encode()),
            )
        )  # fmt: skip
    price_tokens({"tiny": (100, 300)})
    online_node(bob, ram_mb=64000)
    return f"{live_server.url}/v1"


def _client(base_url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=10)


def test_the_official_client_lists_the_models_the_pool_can_serve(base_url, alice):
    # Each client is closed (`with`): an open keep-alive connection would keep the live
    # server's thread, and its database session, alive past the test.
    with _client(base_url, key_for(alice, "submitter")) as client:
        models = list(client.models.list())
    assert [m.id for m in models] == ["tiny"]
    assert models[0].object == "model" and models[0].owned_by == "computepool"


def test_the_official_client_raises_its_own_errors(base_url, bob):
    with _client(base_url, "cpk_not-a-key") as client:
        with pytest.raises(openai.AuthenticationError) as unknown:
            client.models.list()
    assert unknown.value.code == "invalid_api_key"
    with _client(base_url, key_for(bob, "operator")) as client:
        with pytest.raises(openai.PermissionDeniedError, match="submitter role"):
            client.models.list()
