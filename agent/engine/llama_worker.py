"""The llama.cpp engine's own process: `python -m agent.engine.llama_worker`.

It speaks JSON lines on stdin/stdout and nothing else (the sandbox gives it no network):
first `{"op": "load", "path", "n_ctx", "n_gpu_layers"}` → `{"ok": true}` or `{"error", "unfit"}`;
then per request `{"op": "generate", ...}` → `{"t": "piece"}` per token (the first with
`"p"`: the prompt's size in tokens), then `{"end": finish_reason, "prompt_tokens",
"completion_tokens"}` or `{"error"}`. `{"op": "cancel"}` at any
time stops the generation in progress at its next token. End of stdin ends the process.
"""

import json
import queue
import sys
import threading
from typing import Any


def _write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _pieces(llm: Any, request: dict[str, Any]):
    options = {
        "max_tokens": request["max_tokens"],
        "temperature": request.get("temperature", 1.0),
        "top_p": request.get("top_p", 1.0),
        "stop": request.get("stop") or None,
        "seed": request.get("seed"),
        "stream": True,
    }
    if request["kind"] == "chat":
        for chunk in llm.create_chat_completion(messages=request["messages"], **options):
            choice = chunk["choices"][0]
            yield choice["delta"].get("content") or "", choice.get("finish_reason")
    else:
        for chunk in llm.create_completion(prompt=request["prompt"], **options):
            choice = chunk["choices"][0]
            yield choice.get("text") or "", choice.get("finish_reason")


def _generate(llm: Any, request: dict[str, Any], cancel: threading.Event) -> None:
    count, finish = 0, None
    try:
        for piece, reason in _pieces(llm, request):
            if piece:
                count += 1
                if count == 1:  # the prompt is evaluated: its size, for a bill cut short
                    _write({"t": piece, "p": max(int(getattr(llm, "n_tokens", 1)) - 1, 0)})
                else:
                    _write({"t": piece})
            finish = reason or finish
            if cancel.is_set():
                finish = "cancelled"
                break
    except Exception as exc:  # any failure of the library is this request's, not the process's
        _write({"error": f"{type(exc).__name__}: {exc}"})
        return
    # The context holds the prompt and what was generated: the prompt is the difference.
    prompt_tokens = max(int(getattr(llm, "n_tokens", 0)) - count, 0)
    _write({"end": finish or "stop", "prompt_tokens": prompt_tokens, "completion_tokens": count})


def main() -> int:
    load = json.loads(sys.stdin.readline() or "{}")
    try:
        from llama_cpp import Llama

        llm = Llama(
            model_path=load["path"],
            n_ctx=load["n_ctx"],
            n_gpu_layers=load.get("n_gpu_layers", 0),
            verbose=False,
        )
    except Exception as exc:  # the model cannot run here: say so and end
        _write({"error": f"{type(exc).__name__}: {exc}", "unfit": True})
        return 1
    _write({"ok": True})
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    cancel = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("op") == "cancel":
                cancel.set()
            else:
                requests.put(message)
        cancel.set()
        requests.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (request := requests.get()) is not None:
        cancel.clear()
        _generate(llm, request, cancel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
