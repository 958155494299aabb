"""llama.cpp through llama-cpp-python, in a process of its own under the sandbox rules that
apply to jobs: no network (bubblewrap's own network namespace: the process talks to the agent
only over its stdin and stdout), the sandbox user when the agent runs as root, and a memory cap
(address space) when the model runs on the CPU. One process holds one model.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from agent.engine.base import Answer, Emit, EngineError
from agent.sandbox.base import MIB, SANDBOX_GID, SANDBOX_UID
from agent.sandbox.bwrap_sandbox import PATH, root_links

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


def _readable_roots() -> list[str]:
    """What the engine process must read beyond /usr: the interpreter, its libraries, this
    code; and of /etc only what the dynamic loader reads."""
    code = str(Path(__file__).resolve().parents[2])
    roots = {sys.base_prefix, sys.prefix, code, "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d"}  # fmt: skip
    return sorted(r for r in roots if not r.startswith("/usr/") and Path(r).exists())


def sandboxed(argv: list[str], *, memory_mb: int | None, gpu: bool) -> tuple[list[str], dict]:
    """(argv, environment) for `argv` under bubblewrap, when installed: no network, no other
    namespace shared, no capabilities, user 65534 inside, and a view of the machine limited to
    /usr, the interpreter and this code, read-only; with an address-space cap.

    An agent run as root starts bubblewrap as root, so the files the engine sees (all of them
    read-only, none of them secret) are read with root's owner rights: the interpreter may live
    where no other user can walk (/root/.pyenv). Run the agent as a user of its own where that
    matters; docs/operators.md says so.

    Not --die-with-parent: that fires when the *thread* that started bubblewrap ends, and
    engines are started from a request's thread. The engine ends when its stdin closes instead,
    which the death of the agent does."""
    code = str(Path(__file__).resolve().parents[2])
    env = {"PATH": PATH, "HOME": "/tmp", "PYTHONPATH": code, "LANG": "C.UTF-8"}  # noqa: S108
    bwrap = shutil.which("bwrap")
    if bwrap:
        binds = []
        for root in _readable_roots():
            binds += ["--ro-bind", root, root]
        argv = [
            bwrap, "--unshare-all", "--new-session", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--ro-bind", "/usr", "/usr", *root_links(),
            *(["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]),
            "--proc", "/proc", "--tmpfs", "/tmp",  # noqa: S108 (its own)
            # After /tmp's tmpfs, which would hide a checkout or interpreter under /tmp.
            *binds, "--chdir", "/", "--", *argv,
        ]  # fmt: skip
    else:
        log.warning("bubblewrap is not installed: the engine process is not isolated")
    if memory_mb:
        argv = ["prlimit", f"--as={memory_mb * MIB}", "--", *argv]
    return argv, env


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
