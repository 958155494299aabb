"""Serving models: a long-poll for inference requests beside the task slots.

The poll carries the node's inference state (models loaded and cached, status, current load,
free VRAM, slots) and waits for a request. Each request runs in a thread of its own, up to
`slots` at once: the model's file from the cache (fetched from the hub on first need), the
model loaded into an engine process (the least recently used unloaded first when more than
`max_loaded` would be held), then the tokens pushed to the hub as they come, in batches: an
answer's first token and its end at once, the tokens between as soon as the previous push is
done, but at most one push per PUSH_GAP_S. The hub's answer to a push
says whether to stop (the client left); a push refused because the request moved to another
node stops the generation too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from agent.client import HubClient, HubError, HubUnavailable
from agent.engine.base import Answer, Engine, EngineError
from agent.model_cache import ModelCache, ModelCacheError

log = logging.getLogger(__name__)

# Tokens that keep coming are pushed at most this often: a push is a request through the hub,
# and one per token of hundreds of streams would cost the hub more than relaying them; within
# the gap a push gathers every answer's tokens. Each push also waits for the one before.
PUSH_GAP_S = 0.01
MIB = 1024 * 1024
# Memory kept free beside a model being loaded (the hub's INFERENCE_HEADROOM_MB, by default).
HEADROOM_MB = 512


@dataclass
class InferenceSettings:
    slots: int = 1
    poll_wait_s: int = 20
    max_loaded: int = 4
    vram_cap_mb: int = 0  # the most GPU memory models may take (0: whatever is free)
    retry_s: float = 2.0


class _Answer:
    """One request's entries on their way to the hub, and whether the hub wants it stopped."""

    def __init__(self, assignment: dict[str, Any]) -> None:
        self.request_id = assignment["request_id"]
        self.attempt = assignment["attempt"]
        self.model = assignment["model"]["name"]
        self.pending: list[dict[str, Any]] = []
        self.started = False  # its first token has been sent
        self.final = False  # its last entry is pending
        self.sent = threading.Event()  # ... and has been sent
        self.stop = False


class _Pushes:
    """Every running answer's entries, sent to the hub together: one request for all of them
    as soon as the previous one is done, at most one per PUSH_GAP_S (a node with hundreds of
    streams would otherwise make thousands of requests a second), except that an answer's
    first token and its end go at once. The hub's reply says, per request, whether to go on."""

    def __init__(self, client: HubClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._answers: dict[int, _Answer] = {}
        self._wake = threading.Event()  # entries are waiting
        self._urgent = threading.Event()  # ... a first token or an end among them
        self._thread: threading.Thread | None = None

    def open(self, assignment: dict[str, Any]) -> _Answer:
        answer = _Answer(assignment)
        with self._lock:
            self._answers[answer.request_id] = answer
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="push", daemon=True)
                self._thread.start()
        return answer

    def add(self, answer: _Answer, pieces: list[str], prompt_tokens: int | None = None) -> bool:
        with self._lock:
            if answer.stop:
                return False
            if prompt_tokens is not None:
                answer.pending.append({"k": "p", "v": prompt_tokens})
            if pieces:
                last = answer.pending[-1] if answer.pending else None
                if last is not None and last["k"] == "t":
                    last["v"].extend(pieces)
                else:
                    answer.pending.append({"k": "t", "v": list(pieces)})
            if not answer.started and pieces:
                answer.started = True
                self._urgent.set()
            self._wake.set()
            return True

    def finish(self, answer: _Answer, entry: dict[str, Any]) -> None:
        """Send the answer's last entry (its end, or an error) and wait until it is sent."""
        with self._lock:
            if answer.stop:  # what came since the hub said stop is not wanted
                answer.pending = []
            answer.pending.append(entry)
            answer.final = True
        self._urgent.set()
        self._wake.set()
        answer.sent.wait(30)

    def _loop(self) -> None:
        last = 0.0
        while True:
            self._wake.wait()
            left = last + PUSH_GAP_S - time.monotonic()
            if left > 0:
                self._urgent.wait(left)
            self._wake.clear()
            self._urgent.clear()
            last = time.monotonic()
            with self._lock:
                batch = [a for a in self._answers.values() if a.pending]
                pushes = [
                    {"request_id": a.request_id, "attempt": a.attempt, "model": a.model,
                     "entries": a.pending}
                    for a in batch
                ]  # fmt: skip
                finished = [a for a in batch if a.final]
                for answer in batch:
                    answer.pending = []
                for answer in finished:
                    del self._answers[answer.request_id]
            if not pushes:
                continue
            try:
                results = self._client.inference_push(pushes)
            except HubError as exc:
                log.warning("push of %d answer(s) failed (%s); stopping them", len(batch), exc)
                results = {}
            for answer in batch:
                result = results.get(str(answer.request_id), "refused")
                if result != "ok" and not answer.stop:
                    why = "the hub asks to stop" if result == "stop" else "no longer this node's"
                    log.info("request %s: %s; stopping", answer.request_id, why)
                    answer.stop = True
            for answer in finished:
                answer.sent.set()


class InferenceService:
    def __init__(
        self,
        *,
        client: HubClient,
        cache: ModelCache,
        engine_factory: Callable[[dict[str, Any]], Engine],
        settings: InferenceSettings,
        free_vram_mb: Callable[[], int | None] = lambda: None,
        free_ram_mb: Callable[[], int] = lambda: psutil.virtual_memory().available // MIB,
    ) -> None:
        self._free_ram_mb = free_ram_mb
        self._client = client
        self._cache = cache
        self._engine_factory = engine_factory
        self._settings = settings
        self._free_vram_mb = free_vram_mb
        self._engines: OrderedDict[str, Engine] = OrderedDict()  # sha256 → engine, LRU first
        self._names: dict[str, str] = {}  # sha256 → model name
        self._needs: dict[str, tuple[int, bool]] = {}  # sha256 → (MB it needs, on a GPU?)
        self._engines_lock = threading.RLock()
        self._fetch_lock = threading.Lock()
        self._running = 0
        self._running_lock = threading.Lock()
        self._slot_freed = threading.Event()
        self._pushes = _Pushes(client)
        self._stop = threading.Event()
        self.draining = False

    # -- state -------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        with self._engines_lock:
            loaded = [self._names[sha] for sha in self._engines]
        with self._running_lock:
            running = self._running
        if self.draining or self._stop.is_set():
            status = "draining"
        else:
            status = "busy" if running >= self._settings.slots else "available"
        cached = sorted({name for model in self._cache.cached() for name in model.names})
        return {
            "status": status,
            "slots": self._settings.slots,
            "current_load": running,
            "free_vram_mb": self._free_vram_mb(),
            "models_loaded": loaded[:32],
            "models_cached": cached[:256],
        }

    # -- loop --------------------------------------------------------------------------------

    def run(self) -> None:
        """Poll until stopped; each request gets a thread while a slot is free."""
        while not self._stop.is_set():
            with self._running_lock:
                free = self._settings.slots - self._running
            if free <= 0:
                self._slot_freed.wait(0.5)
                self._slot_freed.clear()
                continue
            try:
                assignments = self._client.inference_poll(
                    self.state(), wait=self._settings.poll_wait_s, free=free
                )
            except HubError as exc:
                level = logging.INFO if isinstance(exc, HubUnavailable) else logging.WARNING
                log.log(level, "inference poll failed (%s); retrying", exc)
                self._stop.wait(self._settings.retry_s)
                continue
            for assignment in assignments[:free]:
                with self._running_lock:
                    self._running += 1
                threading.Thread(
                    target=self._serve_slot, args=(assignment,), name="inference", daemon=True
                ).start()
            if self.draining:
                # A draining node is sent nothing and answered at once: it only says so now
                # and then (the owner's rules may keep it so for hours).
                self._stop.wait(self._settings.retry_s)

    def stop(self) -> None:
        self._stop.set()
        with self._engines_lock:
            engines = list(self._engines.values())
            self._engines.clear()
        for engine in engines:
            engine.close()

    def _serve_slot(self, assignment: dict[str, Any]) -> None:
        try:
            self.serve(assignment)
        except Exception as exc:
            log.exception("request %s: unexpected error", assignment.get("request_id"))
            # Said to the hub at once, which moves the request on rather than wait for it.
            answer = self._pushes.open(assignment)
            self._pushes.finish(answer, {"k": "x", "v": {"error": f"agent error: {exc}"}})
        finally:
            with self._running_lock:
                self._running -= 1
            self._slot_freed.set()

    # -- one request -------------------------------------------------------------------------

    def serve(self, assignment: dict[str, Any]) -> Answer | None:
        answer = self._pushes.open(assignment)
        model = assignment["model"]
        log.info("request %s: %s (attempt %s)", assignment["request_id"], model["name"],
                 assignment["attempt"])  # fmt: skip
        try:
            engine = self._engine_for(model)
        except (EngineError, ModelCacheError, HubError) as exc:
            unfit = isinstance(exc, EngineError) and exc.unfit
            log.warning("request %s: cannot load %s: %s", assignment["request_id"],
                        model["name"], exc)  # fmt: skip
            self._pushes.finish(answer, {"k": "x", "v": {"error": f"cannot load the model: {exc}",
                                          "unfit": unfit}})  # fmt: skip
            return None
        request = {key: assignment[key] for key in
                   ("kind", "max_tokens", "temperature", "top_p", "stop", "seed")}  # fmt: skip
        request["messages" if assignment["kind"] == "chat" else "prompt"] = assignment.get(
            "messages" if assignment["kind"] == "chat" else "prompt"
        )
        try:
            result = engine.generate(
                request, lambda pieces, prompt=None: self._pushes.add(answer, pieces, prompt)
            )
        except EngineError as exc:
            self._unload(model["sha256"])
            self._pushes.finish(answer, {"k": "x", "v": {"error": str(exc)}})
            return None
        end = {"finish_reason": result.finish_reason, "prompt_tokens": result.prompt_tokens}
        self._pushes.finish(answer, {"k": "e", "v": end})
        return result

    def _engine_for(self, model: dict[str, Any]) -> Engine:
        sha = model["sha256"]
        with self._engines_lock:
            engine = self._engines.get(sha)
            if engine is not None:
                self._engines.move_to_end(sha)
                return engine
        engine = self._engine_factory(model)  # may refuse the model here (EngineError)
        on_gpu = bool(getattr(engine, "on_gpu", False))
        need = int(model.get("vram_mb" if on_gpu else "ram_mb") or 0)
        # One download at a time: requests that arrive together for a model not yet here
        # would otherwise write the same partial file at once.
        with self._fetch_lock:
            path = self._cache.ensure(model["name"], self._client, sha256=sha)
        with self._engines_lock:
            loaded = self._engines.get(sha)
            if loaded is not None:  # another request loaded it meanwhile
                self._engines.move_to_end(sha)
                return loaded
            # The least recently used go first: past the count allowed, or while the memory
            # this model needs (with the catalog's headroom) is not free.
            while self._engines and (
                len(self._engines) >= self._settings.max_loaded
                or need + HEADROOM_MB > self._free_mb(on_gpu)
            ):
                old_sha, old = self._engines.popitem(last=False)
                log.info("unloading %s to make room", self._names.get(old_sha, old_sha))
                old.close()
                self._needs.pop(old_sha, None)
            engine.load(path, context_length=model["context_length"])
            self._engines[sha] = engine
            self._names[sha] = model["name"]
            self._needs[sha] = (need, on_gpu)
            log.info("loaded %s", model["name"])
            return engine

    def _free_mb(self, on_gpu: bool) -> int:
        if not on_gpu:
            return self._free_ram_mb()
        free = self._free_vram_mb() or 0
        cap = self._settings.vram_cap_mb
        if cap:
            used = sum(need for need, gpu in self._needs.values() if gpu)
            free = min(free, cap - used)
        return free

    def _unload(self, sha: str) -> None:
        with self._engines_lock:
            engine = self._engines.pop(sha, None)
        if engine is not None:
            engine.close()
