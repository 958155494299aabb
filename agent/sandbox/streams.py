"""Where a job's stdout and stderr go: the caller's callback as they arrive, and a bounded tail."""

from __future__ import annotations

import logging
import threading

from agent.sandbox.base import OutputCallback

log = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024


class TailBuffer:
    """The last `limit` bytes written, however much that was."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self._limit = limit
        self._data = bytearray()

    def write(self, chunk: bytes) -> None:
        self._data += chunk
        # Trimming only past twice the limit keeps a chatty job from costing a copy per chunk.
        if len(self._data) > 2 * self._limit:
            del self._data[: -self._limit]

    def text(self) -> str:
        return bytes(self._data[-self._limit :]).decode("utf-8", errors="replace")


class OutputSink:
    """Fed from reader threads; a failing callback is logged once and then left out."""

    def __init__(self, on_output: OutputCallback | None) -> None:
        self._on_output = on_output
        self._lock = threading.Lock()
        self._tails = {"stdout": TailBuffer(), "stderr": TailBuffer()}

    def feed(self, stream: str, chunk: bytes) -> None:
        if not chunk:
            return
        with self._lock:
            self._tails[stream].write(chunk)
            callback = self._on_output
        if callback is None:
            return
        try:
            callback(stream, chunk)
        except Exception:
            log.exception("the output callback failed; the rest of this job's output is not sent")
            with self._lock:
                self._on_output = None

    def tail(self, stream: str) -> str:
        with self._lock:
            return self._tails[stream].text()
