"""The body of an OpenAI-style completion request, checked, and the hub's bound on its prompt.

The hub cannot run the model's tokenizer, but it can bound it from above: every token the
engine makes from text covers at least one byte of it, so a prompt never has more tokens than
its UTF-8 bytes plus what the chat template adds around each message. The hold is taken on that
bound, and the agent's count of prompt tokens is never believed beyond it.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from core.errors import DomainError

ROLES = ("system", "developer", "user", "assistant")
# Template text around one message ("<|im_start|>user\n…<|im_end|>\n", "[INST] … [/INST]") and
# the tokens a prompt starts with (BOS): generous for the templates llama.cpp ships.
PER_MESSAGE = 32
PER_PROMPT = 8
MAX_BODY_BYTES = 1024 * 1024
MAX_STOPS = 4


class BadRequest(DomainError):
    code = "invalid_request_error"
    http_status = 400


class ContextTooLong(BadRequest):
    code = "context_length_exceeded"


@dataclass(frozen=True)
class Generation:
    """What to generate, as the agent is told it."""

    kind: str  # "chat" or "completion"
    model: str
    stream: bool
    include_usage: bool
    messages: list[dict[str, str]] = field(default_factory=list)
    prompt: str = ""
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    max_output_price: int | None = None  # per million output tokens, minor units

    def prompt_bound(self) -> int:
        if self.kind == "chat":
            text = sum(len(m["content"].encode()) for m in self.messages)
            return text + PER_MESSAGE * len(self.messages) + PER_PROMPT
        return len(self.prompt.encode()) + PER_PROMPT

    def for_agent(self, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": self.kind,
            "max_tokens": max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": self.stop,
            "seed": self.seed,
        }
        if self.kind == "chat":
            body["messages"] = self.messages
        else:
            body["prompt"] = self.prompt
        return body


def _bad(message: str, param: str) -> BadRequest:
    return BadRequest(message, fields={param: [message]})


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(f"{name} must be a number from {low} to {high}", name)
    return float(value)


def _int(body: dict, name: str, *, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"{name} must be an integer from {low} to {high}", name)
    return value


def _content(value: Any, index: int) -> str:
    """A message's text: a string, or a list of text parts (OpenAI's content parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in value
    ):
        return "".join(part["text"] for part in value)
    raise _bad(f"messages[{index}].content must be text or a list of text parts", "messages")


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise _bad("messages must be a non-empty list", "messages")
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise _bad(f"messages[{index}] must be an object", "messages")
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"messages[{index}].role must be one of {', '.join(ROLES)}", "messages")
        messages.append({"role": role, "content": _content(message.get("content"), index)})
    return messages


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOPS
        or not all(isinstance(s, str) and 0 < len(s) <= 64 for s in stops)
    ):
        raise _bad(f"stop must be a string or up to {MAX_STOPS} strings of 1–64 characters", "stop")
    return stops


def parse(raw: bytes, *, kind: str) -> Generation:
    """The request body as a Generation, or BadRequest naming the first wrong field."""
    if len(raw) > MAX_BODY_BYTES:
        raise _bad(f"the body is larger than {MAX_BODY_BYTES} bytes", "body")
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise _bad("the body is not JSON", "body") from None
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object", "body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required", "model")
    if body.get("n", 1) != 1:
        raise _bad("only n=1 is served", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise _bad("stream_options must be an object", "stream_options")
    max_tokens = _int(body, "max_completion_tokens", low=1, high=1_000_000)
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", low=1, high=1_000_000)
    fields: dict[str, Any] = {}
    if kind == "chat":
        fields["messages"] = _messages(body.get("messages"))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise _bad("prompt must be a non-empty string", "prompt")
        fields["prompt"] = prompt
    return Generation(
        kind=kind,
        model=model,
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
        stop=_stop(body.get("stop")),
        seed=_int(body, "seed", low=-(2**31), high=2**31 - 1),
        max_output_price=_int(body, "max_output_price", low=0, high=10**12),
        **fields,
    )


def completion_budget(generation: Generation, *, context_length: int) -> tuple[int, int]:
    """(prompt bound, max_tokens): refused when the prompt or the answer cannot fit the context."""
    bound = generation.prompt_bound()
    room = context_length - bound
    if room < 1:
        raise ContextTooLong(
            f"the prompt may take up to {bound} tokens, more than the model's context of "
            f"{context_length} leaves room for",
            fields={"messages" if generation.kind == "chat" else "prompt": ["too long"]},
        )
    if generation.max_tokens is None:
        return bound, room
    if generation.max_tokens > room:
        raise _bad(
            f"max_tokens is {generation.max_tokens}, but at most {room} fit the model's "
            f"context of {context_length} after this prompt",
            "max_tokens",
        )
    return bound, generation.max_tokens
