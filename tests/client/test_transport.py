"""What the live hub does not do today, against small local servers: a download redirected to
another host (signed storage URLs), a file whose bytes do not match its checksum, a 429."""

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.client.conftest import Cli

Reply = tuple[int, dict[str, str], bytes]


class Server:
    """An HTTP server on 127.0.0.1 answering from `routes` (path → reply or callable), keeping
    every request's path and headers."""

    def __init__(self) -> None:
        self.routes: dict[str, Reply | Callable[[], Reply]] = {}
        self.received: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.received.append((self.path, dict(self.headers)))
                route = server.routes.get(self.path.split("?")[0], (404, {}, b"{}"))
                status, headers, body = route() if callable(route) else route
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    hub, storage = Server(), Server()
    yield hub, storage
    hub.stop()
    storage.stop()


def _json(value: object) -> Reply:
    return 200, {"Content-Type": "application/json"}, json.dumps(value).encode()


def _job(*artifacts: dict) -> dict:
    attempt = {"state": "succeeded", "verdict": "", "artifacts": list(artifacts)}
    return {
        "id": 5,
        "state": "succeeded",
        "tasks": [{"index": 0, "replica": 0, "attempts": [attempt]}],
    }


def _artifact(id: int, name: str, content: bytes) -> dict:
    sha = hashlib.sha256(content).hexdigest()
    return {"id": id, "name": name, "size": len(content), "sha256": sha, "created_at": ""}


def test_a_download_redirected_to_another_host_does_not_carry_the_key(
    servers, tmp_path, client_src_on_path
):
    from computepool_client import Client

    hub, storage = servers
    hub.routes["/api/v1/jobs/5"] = _json(_job(_artifact(1, "out.bin", b"stored bytes")))
    signed = f"http://localhost:{storage.port}/bucket/out.bin?signature=abc"
    hub.routes["/api/v1/artifacts/1/download"] = (302, {"Location": signed}, b"")
    storage.routes["/bucket/out.bin"] = (200, {}, b"stored bytes")

    (path,) = Client(f"http://127.0.0.1:{hub.port}", "cpk_secret").jobs.download(5, tmp_path)

    assert path.read_bytes() == b"stored bytes"
    assert [h.get("Authorization") for _, h in hub.received] == ["Bearer cpk_secret"] * 2
    ((where, headers),) = storage.received
    assert where == "/bucket/out.bin?signature=abc"
    assert "Authorization" not in headers
    assert "cpk_secret" not in json.dumps(headers)


def test_a_file_that_does_not_match_its_checksum_is_not_kept(servers, tmp_path):
    hub, _ = servers
    expected = _artifact(2, "result.txt", b"what the agent uploaded")
    hub.routes["/api/v1/jobs/5"] = _json(_job(expected))
    hub.routes["/api/v1/artifacts/2/download"] = (
        200,
        {"X-Checksum-Sha256": expected["sha256"]},
        b"what arrived instead",
    )
    cli = Cli(hub=f"http://127.0.0.1:{hub.port}", key="cpk_x", trace=tmp_path / "trace")

    result = cli("get", "5", "-o", str(tmp_path / "out"))

    assert result.returncode == 5
    assert result.stderr.startswith("computepool: result.txt (artifact 2): sha256 ")
    assert result.stderr.count("\n") == 1
    assert list((tmp_path / "out").iterdir()) == []


def test_a_throttled_request_is_sent_again_after_retry_after(servers, client_src_on_path):
    from computepool_client import Client

    hub, _ = servers
    answers = iter([(429, {"Retry-After": "0"}, b'{"error": "throttled"}'), _json(_job())])
    hub.routes["/api/v1/jobs/5"] = lambda: next(answers)

    assert Client(f"http://127.0.0.1:{hub.port}", "cpk_x").jobs.get(5)["id"] == 5
    assert len(hub.received) == 2
