"""The hub client against a real HTTP server on 127.0.0.1 that plays the hub.

`HubStub`, `HubKeys` and `claim_payload` are shared with the runner, daemon and CLI tests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from agent.client import (
    AuthError,
    Backoff,
    HubClient,
    HubRejected,
    HubUnavailable,
    StaleLease,
)

Reply = tuple[int, Any]  # status and a body: a dict (JSON), bytes (raw) or None (empty)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, bytes]:
        head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + self.body)
        return {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()
        }


class HubStub:
    """Plays the hub: records every request and answers from per-path routes."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.claims: list[dict[str, Any]] = []
        self.routes: dict[tuple[str, str], Reply | Callable[[Recorded], Reply]] = {}
        self.heartbeat_reply: dict[str, Any] = {
            "poll_interval_s": 1,
            "drain": False,
            "leases": {},
            "cancel": [],
            "state": "online",
        }
        self.released = threading.Event()  # set on stop: unblocks slow routes
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> HubStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                recorded = Recorded(
                    self.command, self.path, dict(self.headers), self.rfile.read(length)
                )
                with stub._changed:
                    stub.requests.append(recorded)
                    stub._changed.notify_all()
                status, body = stub._reply(recorded)
                raw = json.dumps(body).encode() if isinstance(body, dict | list) else body or b""
                self.send_response(status)
                if isinstance(body, dict | list):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self.released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _reply(self, recorded: Recorded) -> Reply:
        route = self.routes.get((recorded.method, recorded.path))
        if route is not None:
            return route(recorded) if callable(route) else route
        if recorded.path == "/api/v1/agent/heartbeat":
            return 200, dict(self.heartbeat_reply)
        if recorded.path == "/api/v1/agent/claim":
            with self._changed:
                return (200, self.claims.pop(0)) if self.claims else (204, None)
        if recorded.path.startswith("/api/v1/agent/attempts/"):
            return 200, {"status": "ok", "next": None}
        return 404, {"error": "not_found", "detail": recorded.path}

    def received(self, suffix: str) -> list[Recorded]:
        with self._changed:
            return [r for r in self.requests if r.path.endswith(suffix)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True


@pytest.fixture
def hub() -> Iterator[HubStub]:
    stub = HubStub().start()
    yield stub
    stub.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HubKeys:
    """The hub's Ed25519 signing key, as the agent sees it: raw 32 bytes, standard base64."""

    def __init__(self) -> None:
        self._private = Ed25519PrivateKey.generate()
        raw = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_b64 = base64.b64encode(raw).decode()

    def sign(self, spec: dict[str, Any]) -> str:
        canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return base64.b64encode(self._private.sign(canonical.encode())).decode()


def task_spec(attempt_id: int = 40, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "attempt_id": attempt_id,
        "task_id": 12,
        "job_id": 3,
        "kind": "container",
        "image": "computepool/busybox",
        "command": ["sh", "-c", "echo hi"],
        "script": None,
        "interpreter": None,
        "env": {"MODE": "fast"},
        "inputs": {"data.txt": base64.b64encode(b"1 2 3").decode()},
        "slice_index": 1,
        "slice_count": 4,
        "timeout_s": 30,
        "resources": {"cpu_cores": 2, "ram_mb": 1024, "disk_mb": 128, "vram_mb": 0, "gpus": 0},
        "issued_at": "2025-01-01T00:00:00Z",
    }
    spec.update(overrides)
    return spec


def claim_payload(keys: HubKeys, attempt_id: int = 40, **spec_overrides: Any) -> dict[str, Any]:
    spec = task_spec(attempt_id, **spec_overrides)
    return {
        "attempt_id": attempt_id,
        "lease_token": f"lease-{attempt_id}",
        "lease_expires_at": "2025-01-01T00:05:00Z",
        "spec": spec,
        "signature": keys.sign(spec),
    }


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


# -- backoff -----------------------------------------------------------------------------------


def test_it_doubles_the_delay_up_to_the_cap() -> None:
    backoff = Backoff(base_s=1, cap_s=60, jitter=0.2, rng=FixedRandom(0.0))  # type: ignore[arg-type]

    assert [backoff.next_delay() for _ in range(9)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    backoff.reset()
    assert backoff.next_delay() == 1


def test_it_jitters_only_downwards() -> None:
    backoff = Backoff(base_s=1, cap_s=60, jitter=0.2, rng=FixedRandom(0.5))  # type: ignore[arg-type]

    delays = [backoff.next_delay() for _ in range(8)]

    assert delays == pytest.approx([0.9, 1.8, 3.6, 7.2, 14.4, 28.8, 54.0, 54.0])


# -- requests and error mapping ----------------------------------------------------------------


def test_it_sends_the_agent_key_as_a_bearer_token(hub: HubStub) -> None:
    hub.routes["GET", "/api/v1/agent/me"] = (200, {"id": 7, "tier": "rtx-4090"})

    assert HubClient(hub.url, "agent-key").me() == {"id": 7, "tier": "rtx-4090"}
    assert hub.requests[0].headers["Authorization"] == "Bearer agent-key"


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (409, {"error": "stale_lease", "detail": "lease expired"}, StaleLease),
        (409, {"error": "conflict"}, HubRejected),
        (401, {"error": "not_authenticated"}, AuthError),
        (403, {"error": "permission_denied"}, AuthError),
        (500, b"<html>oops</html>", HubUnavailable),
        (503, {"error": "unavailable"}, HubUnavailable),
        (429, {"error": "throttled"}, HubUnavailable),
        (400, {"error": "invalid", "fields": {"progress": ["max 100"]}}, HubRejected),
    ],
)
def test_it_maps_error_answers(hub: HubStub, status: int, body: Any, error: type) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/5/progress"] = (status, body)

    with pytest.raises(error) as caught:
        HubClient(hub.url, "k").progress(5, lease_token="t", progress=10)

    assert caught.value.status == status
    assert type(caught.value) is error
    if isinstance(body, dict) and "fields" in body:
        assert caught.value.fields == body["fields"]


def test_it_maps_a_refused_connection_to_hub_unavailable() -> None:
    client = HubClient(f"http://127.0.0.1:{free_port()}", "k")

    with pytest.raises(HubUnavailable, match="cannot connect"):
        client.me()


def test_it_maps_a_slow_answer_to_hub_unavailable(hub: HubStub) -> None:
    def slow(_: Recorded) -> Reply:
        hub.released.wait(2)
        return 200, {}

    hub.routes["GET", "/api/v1/agent/me"] = slow
    client = HubClient(hub.url, "k", read_timeout_s=0.2)

    with pytest.raises(HubUnavailable, match="did not answer in time"):
        client.me()


def test_it_maps_a_non_json_answer_to_hub_unavailable(hub: HubStub) -> None:
    hub.routes["GET", "/api/v1/agent/me"] = (200, b"<html>maintenance</html>")

    with pytest.raises(HubUnavailable, match="not JSON"):
        HubClient(hub.url, "k").me()


# -- endpoints ---------------------------------------------------------------------------------


def test_it_registers_with_the_operator_key(hub: HubStub) -> None:
    hub.routes["POST", "/api/v1/nodes/"] = (
        201,
        {
            "node": {"id": 9, "name": "rig", "state": "online", "tier": "cpu"},
            "agent_key": "new-agent-key",
            "hub_public_key": "cHVi",
            "heartbeat_interval_s": 10,
        },
    )

    registration = HubClient(hub.url, "operator-key").register(
        name="rig", region="IN", capabilities={"gpus": []}
    )

    assert registration.node_id == 9
    assert registration.agent_key == "new-agent-key"
    assert registration.heartbeat_interval_s == 10
    assert hub.requests[0].json() == {"name": "rig", "region": "IN", "capabilities": {"gpus": []}}
    assert hub.requests[0].headers["Authorization"] == "Bearer operator-key"


def test_it_claims_nothing_on_204_and_a_claim_on_200(hub: HubStub) -> None:
    keys = HubKeys()
    client = HubClient(hub.url, "k")

    assert client.claim(wait=99) is None
    hub.claims.append(claim_payload(keys, attempt_id=41))
    claim = client.claim(wait=0)

    assert hub.requests[0].json() == {"wait": 30}  # clamped to what the hub accepts
    assert claim is not None
    assert (claim.attempt_id, claim.lease_token) == (41, "lease-41")
    assert claim.spec["task_id"] == 12


def test_it_sends_heartbeats_and_reads_cancellations(hub: HubStub) -> None:
    hub.heartbeat_reply |= {"poll_interval_s": 5, "cancel": ["lease-1"], "drain": True}
    client = HubClient(hub.url, "k")

    reply = client.heartbeat(
        status="busy",
        load={"cpu_pct": 50.0, "mem_pct": 20.0, "running": 1, "slots": 1},
        gpus=[],
        leases=["lease-1"],
    )

    assert (reply.poll_interval_s, reply.cancel, reply.drain) == (5, ["lease-1"], True)
    body = hub.requests[0].json()
    assert body["status"] == "busy"
    assert body["leases"] == ["lease-1"]
    assert "capabilities" not in body


def test_it_uploads_an_artifact_with_its_checksum(hub: HubStub, tmp_path: Path) -> None:
    output = tmp_path / "result.bin"
    output.write_bytes(b"\x00result\xff")
    digest = hashlib.sha256(output.read_bytes()).hexdigest()

    HubClient(hub.url, "k").upload_artifact(
        40, lease_token="lease-40", name="result.bin", sha256=digest, path=output
    )

    form = hub.received("/attempts/40/artifacts")[0].form()
    assert form == {
        "lease_token": b"lease-40",
        "name": b"result.bin",
        "sha256": digest.encode(),
        "file": b"\x00result\xff",
    }


def test_it_returns_the_next_claim_from_complete(hub: HubStub) -> None:
    keys = HubKeys()
    hub.routes["POST", "/api/v1/agent/attempts/40/complete"] = (
        200,
        {"status": "succeeded", "next": claim_payload(keys, attempt_id=41)},
    )

    reply = HubClient(hub.url, "k").complete(
        40,
        lease_token="lease-40",
        exit_code=0,
        stdout_tail="",
        stderr_tail="",
        artifacts=[],
        reported_runtime_s=1.5,
        want_next=True,
    )

    assert reply.status == "succeeded"
    assert reply.next is not None and reply.next.attempt_id == 41
    assert hub.requests[0].json()["want_next"] is True
