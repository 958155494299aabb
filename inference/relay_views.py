"""The relay's endpoints: async views, so a stream held open costs a coroutine, not a thread or
a database connection (served under uvicorn: docs/inference.md).

Client side, `POST /v1/chat/completions` and `POST /v1/completions`:
1. admission, a DRF view run in a thread: the submitter's key, the rate limit, the body, the
   model (404 if the catalog has no such enabled model);
2. candidates (inference.routing), waiting up to INFERENCE_QUEUE_WAIT_S for one (else 429 with
   Retry-After), then the hold at their highest rates (402 if the credits do not cover it);
3. dispatch: the first candidate with a free slot gets the request; if it sends nothing within
   INFERENCE_FIRST_TOKEN_S, or an error, the next one does (the client sees only latency);
4. relay: tokens as SSE chunks or one JSON body. A node that fails after its first token ends
   the stream with an error chunk. The hub counts what it relayed and settles on that.

Agent side, `POST /api/v1/agent/inference/poll` (long-poll, agent key) and
`POST /api/v1/agent/inference/requests/<id>/push` (the attempt's entries).
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsSubmitter
from core.errors import DomainError
from inference import billing, db_threads, metrics, openai_errors, protocol, relay, routing
from inference.models import InferenceModel, InferenceRequest
from inference.protocol import Generation
from ledger.pricing import Rules, rules_at

log = logging.getLogger(__name__)


def _error(message: str, status: int, *, code: str | None = None, **headers: str) -> HttpResponse:
    response = JsonResponse(openai_errors.error_body(message, status, code=code), status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _rendered(response: Response) -> HttpResponse:
    response.render()
    return response


# --- admission -------------------------------------------------------------------------------


@dataclass
class Admitted:
    submitter_id: int
    generation: Generation
    model: InferenceModel
    rules: Rules
    prompt_bound: int
    max_tokens: int
    # Most requests find their candidates and are held in the admission's own thread (one
    # hop from the event loop instead of three); otherwise the relay waits for a candidate.
    candidates: list[routing.Candidate] = field(default_factory=list)
    opened: InferenceRequest | None = None


def _hold(admitted: Admitted, candidates: list[routing.Candidate]) -> InferenceRequest:
    """Open the request, holding its most at the highest rates among its candidates."""
    return billing.request_open(
        submitter_id=admitted.submitter_id,
        model=admitted.model,
        kind=admitted.generation.kind,
        prompt_bound=admitted.prompt_bound,
        max_tokens=admitted.max_tokens,
        rate_in=max(c.rate_in for c in candidates),
        rate_out=max(c.rate_out for c in candidates),
        book_version=admitted.rules.version,
    )


class _Admission(APIView):
    """Key, role, rate limit and body, with the project's checks and OpenAI's error shape."""

    permission_classes = [IsSubmitter]
    kind = "chat"

    def get_exception_handler(self):
        return openai_errors.exception_handler

    def post(self, request: Request) -> Response:
        generation = protocol.parse(request._request.body, kind=self.kind)
        model = InferenceModel.objects.filter(name=generation.model, enabled=True).first()
        rules = rules_at()
        if model is None or model.name not in rules.priced_models():
            return openai_errors.openai_error(
                f"The model {generation.model!r} does not exist", 404, code="model_not_found"
            )
        bound, max_tokens = protocol.completion_budget(
            generation, context_length=model.context_length
        )
        admitted = Admitted(request.user.pk, generation, model, rules, bound, max_tokens)
        admitted.candidates = routing.candidates(
            model, rules, max_output_price=generation.max_output_price
        )
        if admitted.candidates:
            admitted.opened = _hold(admitted, admitted.candidates)
        response = Response(status=202)
        response.admitted = admitted
        return response


class _ChatAdmission(_Admission):
    kind = "chat"


class _CompletionAdmission(_Admission):
    kind = "completion"


# --- dispatch --------------------------------------------------------------------------------


class NoCapacity(Exception):
    pass


@dataclass
class Serving:
    """The attempt in force and what the hub relayed of it."""

    request: InferenceRequest
    run: db_threads.Runner
    candidate: routing.Candidate | None = None
    attempt: int = 0
    slot: str = ""
    cursor: str = "0"
    started: float = field(default_factory=time.monotonic)
    ttft_ms: int | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None
    failure: str = ""
    pending: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    stream: bool = False  # the client asked for server-sent events


async def _candidates(admitted: Admitted, run: db_threads.Runner) -> list[routing.Candidate]:
    """The candidates, waiting a bounded time for the first to appear."""
    deadline = time.monotonic() + settings.INFERENCE_QUEUE_WAIT_S
    while True:
        found = await run(
            routing.candidates,
            admitted.model,
            admitted.rules,
            max_output_price=admitted.generation.max_output_price,
        )
        if found or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(0.25)


async def _first_entries(serving: Serving) -> bool:
    """Wait for the attempt's first entries; True if it started answering."""
    deadline = time.monotonic() + settings.INFERENCE_FIRST_TOKEN_S
    req = serving.request
    while (left := deadline - time.monotonic()) > 0:
        entries = await relay.read(req.pk, serving.attempt, serving.cursor, block_s=min(left, 5))
        if entries:
            serving.cursor = entries[-1][0]
            if entries[0][1].get("k") == "x":  # an error before any token: try the next node
                serving.failure = json.loads(entries[0][1]["v"]).get("error", "node error")
                return False
            serving.pending = entries
            serving.ttft_ms = int((time.monotonic() - serving.started) * 1000)
            return True
    serving.failure = "no first token in time"
    return False


async def _dispatch(serving: Serving, candidates: list[routing.Candidate], body: dict) -> None:
    """Send the request to the first candidate that takes it and starts answering; raise
    NoCapacity when every node stayed full for the whole wait."""
    deadline = time.monotonic() + settings.INFERENCE_QUEUE_WAIT_S
    untried = list(candidates)
    while untried:
        taken = False
        for candidate in list(untried):
            member = f"{serving.request.pk}:{serving.attempt + 1}"
            if not await relay.slot_take(candidate.node_id, candidate.slots, member):
                continue
            taken = True
            untried.remove(candidate)
            serving.attempt += 1
            serving.candidate, serving.slot, serving.cursor = candidate, member, "0"
            serving.failure = ""
            await relay.assign(serving.request.pk, serving.attempt, candidate.node_id,
                               candidate.key_hash, body)  # fmt: skip
            if await _first_entries(serving):
                return
            log.info(
                "request %s: node %s failed before answering (%s); trying the next",
                serving.request.pk,
                candidate.node_id,
                serving.failure,
            )
            await relay.fence(serving.request.pk)
            await relay.slot_give(candidate.node_id, member)
            serving.candidate = None
        if not taken:
            if time.monotonic() >= deadline:
                raise NoCapacity
            await asyncio.sleep(0.05)
    serving.failure = serving.failure or "no node could serve it"


# --- relay -----------------------------------------------------------------------------------


async def _pieces(serving: Serving) -> AsyncIterator[list[str]]:
    """The answer's text as the hub relays it, in the runs of tokens that arrived together
    (one write to the client for each run, not one per token); sets how it ended."""
    req = serving.request
    last_keep = time.monotonic()
    while True:
        entries, serving.pending = serving.pending, []
        if not entries:
            entries = await relay.read(
                req.pk, serving.attempt, serving.cursor, block_s=settings.INFERENCE_STALL_S
            )
            if not entries:
                serving.failure = "the node stopped answering"
                return
            serving.cursor = entries[-1][0]
        run: list[str] = []
        for _id, entry in entries:
            kind, value = entry.get("k"), json.loads(entry.get("v", "null"))
            if kind == "p":  # never believed beyond the hub's own bound
                serving.prompt_tokens = min(max(int(value), 0), req.prompt_bound)
            elif kind == "t":
                room = req.max_tokens - serving.tokens
                run += [str(piece) for piece in value[:room]]
                serving.tokens += min(len(value), room)
                if len(value) > room:
                    serving.finish_reason = "length"
                    await relay.cancel(req.pk)
                    break
            elif kind == "e":
                reported = value.get("prompt_tokens", 0)
                serving.prompt_tokens = min(max(int(reported), 0), req.prompt_bound)
                serving.finish_reason = value.get("finish_reason") or "stop"
                break
            else:
                serving.failure = f"the node failed: {value.get('error', 'error')}"[:200]
                break
        if run:
            yield run
        if serving.finish_reason is not None or serving.failure:
            return
        if time.monotonic() - last_keep > 10:
            await relay.slot_keep(serving.candidate.node_id, serving.slot)
            last_keep = time.monotonic()


async def _close(serving: Serving) -> InferenceRequest:
    """Settle on what was relayed, free the slot and the request's keys. Shielded: it must run
    to the end even when the client has gone and the stream's task is being cancelled."""

    async def close() -> InferenceRequest:
        candidate = serving.candidate
        if candidate is not None:
            await relay.slot_give(candidate.node_id, serving.slot)
        await relay.forget(serving.request.pk, serving.attempt)
        outcome = billing.Outcome(
            node_id=candidate.node_id if candidate else None,
            operator_id=candidate.operator_id if candidate else None,
            prompt_tokens=serving.prompt_tokens,
            completion_tokens=serving.tokens,
            rate_in=candidate.rate_in if candidate else 0,
            rate_out=candidate.rate_out if candidate else 0,
            ttft_ms=serving.ttft_ms,
            finish_reason=serving.finish_reason,
            failure=serving.failure,
        )
        closed = await serving.run(billing.request_close, serving.request.pk, outcome)
        metrics.request_closed(
            served=serving.finish_reason is not None and not serving.failure,
            stream=serving.stream,
            started=serving.started,
            ttft_ms=serving.ttft_ms,
            tokens=serving.tokens,
        )
        return closed

    return await asyncio.shield(asyncio.ensure_future(close()))


def _usage(serving: Serving) -> dict[str, int]:
    return {
        "prompt_tokens": serving.prompt_tokens,
        "completion_tokens": serving.tokens,
        "total_tokens": serving.prompt_tokens + serving.tokens,
    }


def _chunk(admitted: Admitted, serving: Serving, **choice: Any) -> dict[str, Any]:
    chat = admitted.generation.kind == "chat"
    return {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-{serving.request.pk}",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(serving.request.created_at.timestamp()),
        "model": admitted.model.name,
        "choices": [{"index": 0, **choice}] if choice else [],
    }


def _piece(chat: bool, piece: str) -> dict[str, Any]:
    return {"delta": {"content": piece}} if chat else {"text": piece, "logprobs": None}


def _sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


async def _stream(admitted: Admitted, serving: Serving) -> AsyncIterator[bytes]:
    chat = admitted.generation.kind == "chat"
    closed = False
    try:
        if chat:
            yield _sse(_chunk(admitted, serving, delta={"role": "assistant", "content": ""},
                              finish_reason=None))  # fmt: skip
        async for run in _pieces(serving):
            yield b"".join(
                _sse(_chunk(admitted, serving, **_piece(chat, piece), finish_reason=None))
                for piece in run
            )
        if serving.finish_reason is not None and not serving.failure:
            last = {"delta": {}} if chat else {"text": "", "logprobs": None}
            yield _sse(_chunk(admitted, serving, **last, finish_reason=serving.finish_reason))
        await _close(serving)
        closed = True
        if serving.failure:
            error = {"message": serving.failure, "type": "server_error", "code": "node_failed"}
            yield _sse({"error": error})
        elif admitted.generation.include_usage:
            yield _sse({**_chunk(admitted, serving), "usage": _usage(serving)})
        yield _sse("[DONE]")
    finally:
        if not closed:  # the client went away: stop the node and pay for what was delivered
            serving.failure = serving.failure or "the client disconnected"
            await relay.cancel(serving.request.pk)
            await _close(serving)


async def _whole(admitted: Admitted, serving: Serving) -> HttpResponse:
    text = "".join(["".join(run) async for run in _pieces(serving)])
    await _close(serving)
    if serving.failure:
        return _error(serving.failure, 502, code="node_failed")
    chat = admitted.generation.kind == "chat"
    choice: dict[str, Any] = {"index": 0, "finish_reason": serving.finish_reason}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice.update(text=text, logprobs=None)
    body = {
        **_chunk(admitted, serving),
        "object": "chat.completion" if chat else "text_completion",
        "choices": [choice],
        "usage": _usage(serving),
    }
    return JsonResponse(body)


async def _serve(request: HttpRequest, admission: type[_Admission]) -> HttpResponse:
    arrived = time.monotonic()  # time to first token is the client's, from here
    try:
        relay.aclient()
    except relay.RelayUnavailable as exc:
        return _error(str(exc), 503, code="relay_unavailable")
    run = db_threads.runner(request)
    response = await run(admission.as_view(), request)
    admitted: Admitted | None = getattr(response, "admitted", None)
    if admitted is None:
        return _rendered(response)
    candidates, opened = admitted.candidates, admitted.opened
    if opened is None:
        candidates = await _candidates(admitted, run)
        if not candidates:
            return _error(
                f"no node can serve {admitted.model.name!r} now; try again shortly",
                429,
                code="no_capacity",
                Retry_After=str(max(1, settings.INFERENCE_QUEUE_WAIT_S)),
            )
        try:
            opened = await run(_hold, admitted, candidates)
        except DomainError as exc:
            code = "insufficient_quota" if exc.http_status == 402 else exc.code
            return _error(str(exc), exc.http_status, code=code)
    serving = Serving(opened, run, started=arrived, stream=admitted.generation.stream)
    body = {
        "model": {
            "name": admitted.model.name,
            "sha256": admitted.model.sha256,
            "size_bytes": admitted.model.size_bytes,
            "context_length": admitted.model.context_length,
            "vram_mb": admitted.model.vram_mb,
            "ram_mb": admitted.model.ram_mb,
        },
        **admitted.generation.for_agent(admitted.max_tokens),
    }
    try:
        await _dispatch(serving, candidates, body)
    except NoCapacity:
        serving.failure = "no capacity"
        await _close(serving)
        return _error(
            f"every node that serves {admitted.model.name!r} is busy; try again shortly",
            429,
            code="no_capacity",
            Retry_After="1",
        )
    if serving.candidate is None:
        await _close(serving)
        return _error(f"no node could serve the request: {serving.failure}", 503,
                      code="no_node")  # fmt: skip
    if admitted.generation.stream:
        response = StreamingHttpResponse(
            _stream(admitted, serving), content_type="text/event-stream; charset=utf-8"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    return await _whole(admitted, serving)


@method_decorator(csrf_exempt, name="dispatch")
class ChatCompletions(View):
    async def post(self, request: HttpRequest) -> HttpResponse:
        return await _serve(request, _ChatAdmission)


@method_decorator(csrf_exempt, name="dispatch")
class Completions(View):
    async def post(self, request: HttpRequest) -> HttpResponse:
        return await _serve(request, _CompletionAdmission)
