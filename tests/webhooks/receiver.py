"""A real HTTP server for webhooks to land on: it records every request and answers each with
the next status of its script (then 200), as a submitter's receiver would."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when it arrived


@dataclass
class Receiver:
    url: str
    answers: list[int]
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


@contextmanager
def receiver(
    *answers: int, path: str = "/hooks/computepool", delay_s: float = 0
) -> Iterator[Receiver]:
    """Serve on 127.0.0.1 (a free port) until the block ends, answering each request after
    `delay_s` (a slow receiver)."""
    state: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.arrived:
                status = state.answers.pop(0) if state.answers else 200
                state.received.append(
                    Received(self.path, dict(self.headers.items()), body, time.time())
                )
                state.arrived.notify_all()
            time.sleep(delay_s)
            reply = b'{"ok": true}' if status < 300 else b"try again later"
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = Receiver(f"http://127.0.0.1:{server.server_port}{path}", list(answers))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
