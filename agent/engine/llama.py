"""llama.cpp through llama-cpp-python, in a process of its own under the sandbox rules that
apply to jobs: no network (bubblewrap's own network namespace: the process talks to the agent
only over its stdin and stdout), the sandbox user when the agent runs as root, and a memory cap
(address space) when the model runs on the CPU. One process holds one model.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from agent.engine.base import Answer, Emit, EngineError
from agent.sandbox.base import MIB
from agent.sandbox.own_code import sandboxed

log = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 300
# Beyond the model's file: the interpreter, llama.cpp's buffers and the KV cache.
MEMORY_SLACK_MB = 1024


def engine_available() -> str | None:
    """Why llama.cpp cannot run here, or None when it can (for `doctor`)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        return f"llama-cpp-python is not installed ({exc}; see requirements/inference.txt)"
    return None


def engine_check() -> str:
    """Start the engine's process as requests do and have it import llama.cpp: its version
    and the CPU features it was built for, or EngineError with why not (for `doctor`)."""
    probe = (
        "import llama_cpp; print(llama_cpp.__version__, "
        "llama_cpp.llama_print_system_info().decode().strip()[:120])"
    )
    argv, env = sandboxed([sys.executable, "-c", probe], memory_mb=2048, gpu=False)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"the engine's process did not run: {exc}") from exc
    if done.returncode != 0:
        raise EngineError((done.stderr.strip().splitlines() or ["it failed"])[-1])
    return done.stdout.strip()


class LlamaProcess:
    """An Engine: one worker process (agent.engine.llama_worker) holding one model."""

    def __init__(self, *, n_gpu_layers: int = 0, memory_mb: int | None = None) -> None:
        self._n_gpu_layers = n_gpu_layers
        self._memory_mb = memory_mb
        self.on_gpu = n_gpu_layers != 0
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()  # one generation at a time per process

    def load(self, model_path: Path, *, context_length: int) -> None:
        size_mb = model_path.stat().st_size // MIB + 1
        # The address space is capped only on the CPU: GPU drivers reserve far more than they use.
        cap = None if self._n_gpu_layers else (self._memory_mb or size_mb + MEMORY_SLACK_MB)
        argv, env = sandboxed(
            [sys.executable, "-m", "agent.engine.llama_worker"],
            memory_mb=cap,
            gpu=bool(self._n_gpu_layers),
        )
        # The model goes in as an open file: the sandbox sees none of the agent's directories.
        with model_path.open("rb") as model:
            fd = model.fileno()
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                text=True, bufsize=1, cwd="/", env=env, pass_fds=(fd,),
            )  # fmt: skip
        # llama.cpp rounds the context up to a multiple of 256 and llama-cpp-python does not:
        # ask for a multiple, or prompts just under the real size fail.
        n_ctx = -(-context_length // 256) * 256
        load = {"op": "load", "path": f"/proc/self/fd/{fd}", "n_ctx": n_ctx,
                "n_gpu_layers": self._n_gpu_layers}  # fmt: skip
        answer = self._exchange(load)
        if not answer.get("ok"):
            self.close()
            raise EngineError(answer.get("error", "the engine did not load the model"),
                              unfit=bool(answer.get("unfit", True)))  # fmt: skip

    def _exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        self._send(message)
        return self._receive()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise EngineError(f"the engine process is gone ({exc})") from exc

    def _receive(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.poll()
            raise EngineError(f"the engine process ended (exit status {code})", unfit=code == -9)
        return json.loads(line)

    def generate(self, request: dict[str, Any], emit: Emit) -> Answer:
        with self._lock:
            self._send({"op": "generate", **request})
            stopped = False
            while True:
                message = self._receive()
                if "t" in message:
                    if not stopped and not emit([message["t"]], message.get("p")):
                        stopped = True
                        self._send({"op": "cancel"})
                    continue
                if "error" in message:
                    raise EngineError(message["error"])
                finish = message.get("end", "stop")
                return Answer(
                    finish_reason="stop" if finish == "cancelled" else finish,
                    prompt_tokens=int(message.get("prompt_tokens", 0)),
                    completion_tokens=int(message.get("completion_tokens", 0)),
                )

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin:
            with contextlib.suppress(OSError):  # a process already gone closed its end
                proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
