"""The agents' side of the relay: a long-poll for requests, and pushing an answer's tokens.

`POST /api/v1/agent/inference/poll` (agent key): the body is the node's inference state, kept
in Redis while the agent polls (routing reads it; a node that stops polling drops out when it
expires), with `free`, how many requests it can start now; the answer is up to that many
requests for the node (200, `{"assignments": [...]}`) or nothing in time (204).

`POST /api/v1/agent/inference/push`: `{"pushes": [{request_id, attempt, model, entries}]}`, the
next entries of each answer the agent is sending (all of them in one request, so that a node
with many streams makes few requests). Each answer's entries, in order: the prompt's size once
the engine has read it (`{"k": "p", "v": 42}`), tokens (`{"k": "t", "v": ["pie", "ces"]}`), the
end (`{"k": "e", "v": {"finish_reason", "prompt_tokens"}}`) or an error (`{"k": "x", "v":
{"error", "unfit"}}`; `unfit`: the model could not be loaded here, so the node is not offered it
again until the model or the node's memory changes). Each is accepted only from the key of the
node whose attempt is in force; anything else is refused and nothing of it is relayed. The
answer says, per request: "ok", "stop" (the client has gone, or max_tokens was reached) or
"refused"; with 409 when all were refused.
"""

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import DomainError
from inference import db_threads, relay, routing
from inference.models import InferenceModel
from nodes.auth import IsAgent
from nodes.models import Node

STATUSES = ("available", "busy", "degraded", "draining")
MAX_PUSH_BYTES = 256 * 1024
MAX_PIECE = 256


class BadState(DomainError):
    code = "invalid_state"
    http_status = 400


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise BadState(f"{name}: {message}", fields={name: [message]})


def _names(value: Any, name: str, most: int) -> list[str]:
    _check(
        isinstance(value, list)
        and len(value) <= most
        and all(isinstance(v, str) and 0 < len(v) <= 100 for v in value),
        name,
        f"a list of up to {most} model names",
    )
    return value


def node_state(body: Any) -> dict[str, Any]:
    """The state an agent reports with its poll, checked."""
    _check(isinstance(body, dict), "body", "a JSON object")
    status = body.get("status", "available")
    _check(status in STATUSES, "status", f"one of {', '.join(STATUSES)}")
    slots = body.get("slots", 1)
    _check(type(slots) is int and 1 <= slots <= 1024, "slots", "an integer from 1 to 1024")
    load = body.get("current_load", 0)
    _check(type(load) is int and 0 <= load <= slots, "current_load", "an integer from 0 to slots")
    free = body.get("free_vram_mb")
    _check(free is None or (type(free) is int and free >= 0), "free_vram_mb", "an integer ≥ 0")
    return {
        "status": status,
        "slots": slots,
        "current_load": load,
        "free_vram_mb": free,
        "models_loaded": _names(body.get("models_loaded", []), "models_loaded", 32),
        "models_cached": _names(body.get("models_cached", []), "models_cached", 256),
    }


class _PollAdmission(APIView):
    permission_classes = [IsAgent]

    def post(self, request: Request) -> Response:
        state = node_state(request.data)
        wait = request.data.get("wait", settings.INFERENCE_POLL_WAIT_S)
        _check(type(wait) is int and 0 <= wait <= 60, "wait", "seconds from 0 to 60")
        free = request.data.get("free", 1)
        _check(type(free) is int and 1 <= free <= state["slots"], "free", "1 to slots")
        response = Response(status=202)
        response.polled = (request.auth.pk, state, min(wait, settings.INFERENCE_POLL_WAIT_S), free)
        return response


@method_decorator(csrf_exempt, name="dispatch")
class Poll(View):
    async def post(self, request: HttpRequest) -> HttpResponse:
        return await _poll(request)


@method_decorator(csrf_exempt, name="dispatch")
class Push(View):
    async def post(self, request: HttpRequest) -> HttpResponse:
        return await _push(request)


async def _poll(request: HttpRequest) -> HttpResponse:
    try:
        relay.aclient()
    except relay.RelayUnavailable as exc:
        return JsonResponse({"error": "relay_unavailable", "detail": str(exc)}, status=503)
    run = db_threads.runner(request)
    response = await run(_PollAdmission.as_view(), request)
    polled = getattr(response, "polled", None)
    if polled is None:
        response.render()
        return response
    node_id, state, wait, free = polled
    # Kept a little past the poll: a node counts as available only while it keeps polling.
    await relay.node_state_put(node_id, state, ttl_s=wait + 5)
    if state["status"] == "draining":
        return HttpResponse(status=204)
    assignments = await relay.assignments_next(node_id, wait_s=wait, most=free)
    if not assignments:
        return HttpResponse(status=204)
    return JsonResponse({"assignments": assignments})


def _entry(raw: Any) -> dict[str, str]:
    _check(isinstance(raw, dict) and raw.get("k") in ("p", "t", "e", "x"), "entries", "p, t, e, x")
    kind, value = raw["k"], raw.get("v")
    if kind == "p":
        _check(type(value) is int and value >= 0, "entries", "prompt: its tokens, ≥ 0")
    elif kind == "t":
        _check(
            isinstance(value, list)
            and 0 < len(value) <= 1000
            and all(isinstance(p, str) and len(p) <= MAX_PIECE for p in value),
            "entries",
            f"tokens: a list of 1–1000 strings of up to {MAX_PIECE} characters",
        )
    elif kind == "e":
        _check(
            isinstance(value, dict)
            and value.get("finish_reason") in ("stop", "length")
            and type(value.get("prompt_tokens")) is int
            and value["prompt_tokens"] >= 0,
            "entries",
            "end: finish_reason stop or length, prompt_tokens ≥ 0",
        )
        value = {"finish_reason": value["finish_reason"], "prompt_tokens": value["prompt_tokens"]}
    else:
        _check(isinstance(value, dict), "entries", "error: an object")
        value = {"error": str(value.get("error", "error"))[:200], "unfit": bool(value.get("unfit"))}
    return {"k": kind, "v": json.dumps(value)}


def _unfit_marker(node_id: int, model_name: str) -> str | None:
    model = InferenceModel.objects.filter(name=model_name).first()
    node = Node.objects.filter(pk=node_id).values("gpu_vram_mb", "ram_mb").first()
    if model is None or node is None:
        return None
    return routing.unfit_marker(model, **node)


def _pushes(raw: bytes) -> list[tuple[int, int, list[dict[str, str]], str]]:
    if len(raw) > MAX_PUSH_BYTES:
        raise BadState(f"at most {MAX_PUSH_BYTES} bytes", fields={"body": ["too large"]})
    body = json.loads(raw)
    _check(isinstance(body, dict), "body", "a JSON object")
    pushes = body.get("pushes")
    _check(isinstance(pushes, list) and 0 < len(pushes) <= 1024, "pushes", "a list of 1–1024")
    found = []
    for push in pushes:
        _check(isinstance(push, dict), "pushes", "objects")
        request_id, attempt = push.get("request_id"), push.get("attempt")
        _check(type(request_id) is int and request_id >= 1, "request_id", "an integer ≥ 1")
        _check(type(attempt) is int and attempt >= 1, "attempt", "an integer ≥ 1")
        entries = push.get("entries")
        _check(isinstance(entries, list) and len(entries) <= 1000, "entries", "a list")
        model = push.get("model", "")
        _check(isinstance(model, str), "model", "a model's name")
        found.append((request_id, attempt, [_entry(item) for item in entries], model))
    _check(len({p[0] for p in found}) == len(found), "pushes", "one per request")
    return found


async def _push(request: HttpRequest) -> HttpResponse:
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        return JsonResponse({"error": "not_authenticated", "detail": "an agent key"}, status=401)
    try:
        pushes = _pushes(request.body)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"error": "invalid", "detail": "the body is not JSON"}, status=400)
    except DomainError as exc:
        return JsonResponse({"error": exc.code, "detail": str(exc), "fields": exc.fields},
                            status=exc.http_status)  # fmt: skip
    held = await relay.push(key, [(rid, attempt, entries) for rid, attempt, entries, _ in pushes])
    results: dict[str, str] = {}
    for (request_id, _, entries, model), outcome in zip(pushes, held, strict=True):
        if outcome is None:
            results[str(request_id)] = "refused"
            continue
        node_id, cancel = outcome
        results[str(request_id)] = "stop" if cancel else "ok"
        for entry in entries:
            if entry["k"] == "x" and json.loads(entry["v"])["unfit"] and model:
                marker = await db_threads.runner(request)(_unfit_marker, node_id, model)
                if marker is not None:
                    await relay.unfit_put(node_id, model, marker)
    # A batch of which nothing was taken is refused as a whole, as a stale lease is (409).
    refused = all(result == "refused" for result in results.values())
    return JsonResponse({"results": results}, status=409 if refused else 200)
