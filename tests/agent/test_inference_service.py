"""The agent's side of inference with the real engine (llama.cpp in its sandboxed process,
on the tiny model): what it pushes, when it stops, which model it unloads for another, and
what it reports when a model cannot load. The hub is a recorder (it is across the network)."""

import hashlib
import os
from pathlib import Path

import pytest

from agent.engine.llama import LlamaProcess
from agent.inference import InferenceService, InferenceSettings
from agent.model_cache import ModelCache
from inference.tiny_model import write_tiny_model


class RecordingHub:
    def __init__(self, *, stop_after: int | None = None) -> None:
        self.pushes: list[list[dict]] = []
        self.stop_after = stop_after

    def inference_push(self, pushes):
        # One request at a time in these tests: each push carries one answer's entries.
        (push,) = pushes
        self.pushes.append(push["entries"])
        stop = self.stop_after is not None and len(self.pushes) >= self.stop_after
        return {str(push["request_id"]): "stop" if stop else "ok"}

    def model_download(self, name, dest, *, offset=0):
        raise AssertionError("the cache already holds every model in these tests")

    def entries(self) -> list[dict]:
        return [entry for push in self.pushes for entry in push]


def _cached(cache: ModelCache, path: Path) -> str:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    path.rename(cache.root / f"{sha}.gguf")
    return sha


@pytest.fixture
def cache(tmp_path) -> ModelCache:
    return ModelCache(tmp_path / "models", 10 * 2**20)


@pytest.fixture
def models(tmp_path, cache) -> dict[str, str]:
    shas = {}
    for seed, name in enumerate(("tiny-a", "tiny-b")):
        shas[name] = _cached(cache, write_tiny_model(tmp_path / f"{name}.gguf", seed=seed))
    return shas


def _assignment(name: str, sha: str, *, max_tokens: int = 12, request_id: int = 1) -> dict:
    return {
        "request_id": request_id, "attempt": 1, "kind": "chat",
        "model": {"name": name, "sha256": sha, "context_length": 512, "ram_mb": 64, "vram_mb": 0},
        "messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens,
        "temperature": 0.0, "top_p": 1.0, "stop": [], "seed": None,
    }  # fmt: skip


def _service(hub, cache, **kwargs) -> InferenceService:
    return InferenceService(
        client=hub, cache=cache, engine_factory=lambda model: LlamaProcess(),
        settings=InferenceSettings(), **kwargs,
    )  # fmt: skip


def test_an_answer_is_pushed_prompt_size_first_then_tokens_then_its_end(cache, models):
    hub = RecordingHub()
    service = _service(hub, cache)
    try:
        answer = service.serve(_assignment("tiny-a", models["tiny-a"]))
    finally:
        service.stop()
    entries = hub.entries()
    assert entries[0]["k"] == "p" and entries[0]["v"] > 0
    pieces = [piece for entry in entries if entry["k"] == "t" for piece in entry["v"]]
    assert len(pieces) == 12 == answer.completion_tokens
    assert entries[-1] == {"k": "e", "v": {"finish_reason": "length",
                                           "prompt_tokens": answer.prompt_tokens}}  # fmt: skip
    # Tokens go in batches (this model makes them far faster than pushes go), in order.
    assert [e["k"] for e in hub.pushes[0]][:2] == ["p", "t"]
    assert "".join(pieces) == "".join(p for e in entries if e["k"] == "t" for p in e["v"])


def test_the_hub_asking_to_stop_ends_the_generation(cache, models):
    hub = RecordingHub(stop_after=1)
    service = _service(hub, cache)
    try:
        answer = service.serve(_assignment("tiny-a", models["tiny-a"], max_tokens=400))
    finally:
        service.stop()
    assert answer.completion_tokens < 400
    # Told to stop, it sends only its end.
    assert [e["k"] for push in hub.pushes[1:] for e in push] == ["e"]


def test_a_model_that_needs_the_memory_of_another_unloads_the_least_recently_used(cache, models):
    hub = RecordingHub()
    service = None

    def free_ram_mb() -> int:
        # Room for one tiny model and its headroom, not for two.
        return 1000 - 800 * len(service.state()["models_loaded"])

    service = _service(hub, cache, free_ram_mb=free_ram_mb)
    try:
        service.serve(_assignment("tiny-a", models["tiny-a"], request_id=1))
        assert service.state()["models_loaded"] == ["tiny-a"]
        service.serve(_assignment("tiny-b", models["tiny-b"], request_id=2))
        assert service.state()["models_loaded"] == ["tiny-b"]
        assert sorted(service.state()["models_cached"]) == ["tiny-a", "tiny-b"]
    finally:
        service.stop()


def test_a_model_that_cannot_load_is_reported_unfit(cache, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))
    sha = _cached(cache, broken)
    hub = RecordingHub()
    service = _service(hub, cache)
    try:
        assert service.serve(_assignment("broken", sha)) is None
    finally:
        service.stop()
    (entry,) = hub.entries()
    assert entry["k"] == "x" and entry["v"]["unfit"] is True
    assert "cannot load the model" in entry["v"]["error"]
    assert service.state()["models_loaded"] == []


class _OnGpu(LlamaProcess):
    """The real engine on the CPU, counted as if on a GPU (CI has none)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_gpu = True


def test_models_may_take_no_more_vram_than_the_operator_allows(cache, models):
    hub = RecordingHub()
    service = InferenceService(
        client=hub, cache=cache, engine_factory=lambda model: _OnGpu(),
        settings=InferenceSettings(vram_cap_mb=700), free_vram_mb=lambda: 24000,
    )  # fmt: skip

    def on_gpu(name: str, request_id: int) -> dict:
        assignment = _assignment(name, models[name], request_id=request_id)
        assignment["model"].update(vram_mb=100, ram_mb=0)
        return assignment

    try:
        service.serve(on_gpu("tiny-a", 1))  # 100 + 512 headroom fits in 700
        service.serve(on_gpu("tiny-b", 2))  # with tiny-a's 100 taken it would not: tiny-a goes
        assert service.state()["models_loaded"] == ["tiny-b"]
    finally:
        service.stop()
