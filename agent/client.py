"""HTTP client for the hub's agent API, its error mapping and the retry schedule."""

from __future__ import annotations

import importlib.metadata
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

import requests

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 15.0
# A long-polled claim is held by the hub for `wait` seconds; allow for that plus the round trip.
CLAIM_READ_MARGIN_S = 10.0
UPLOAD_READ_TIMEOUT_S = 60.0
# Between two reads of a model's file: a stall this long breaks the download (it resumes later).
MODEL_READ_TIMEOUT_S = 60.0
MAX_CLAIM_WAIT_S = 30


def agent_version() -> str:
    try:
        return importlib.metadata.version("computepool-agent")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class HubError(Exception):
    """The hub answered with an error, or not in the shape the API promises."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.fields = fields or {}


class HubUnavailable(HubError):
    """Connection failure, timeout, 5xx or 429: worth retrying later."""


class AuthError(HubError):
    """401/403: the key is unknown, revoked, or not allowed to do this."""


class StaleLease(HubError):
    """409 stale_lease: the attempt is no longer ours; stop and never retry it."""


class HubRejected(HubError):
    """Any other 4xx: the request itself is wrong, so retrying it changes nothing."""


@dataclass
class Backoff:
    """Exponential delays (base, 2 x base, 4 x base ... cap) with jitter that only shortens them.

    Jitter spreads a fleet's reconnects after an outage; keeping it below the nominal delay keeps
    the cap a true maximum.
    """

    base_s: float = 1.0
    cap_s: float = 60.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next_delay(self) -> float:
        nominal = min(self.cap_s, self.base_s * 2**self.attempt)
        if nominal < self.cap_s:
            self.attempt += 1
        return nominal * (1 - self.jitter * self.rng.random())

    def reset(self) -> None:
        self.attempt = 0


@dataclass
class Claim:
    attempt_id: int
    lease_token: str
    lease_expires_at: str
    spec: dict[str, Any]
    signature: str

    @classmethod
    def from_payload(cls, payload: Any) -> Claim:
        try:
            return cls(
                attempt_id=int(payload["attempt_id"]),
                lease_token=str(payload["lease_token"]),
                lease_expires_at=str(payload.get("lease_expires_at", "")),
                spec=dict(payload["spec"]),
                signature=str(payload["signature"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HubError(f"malformed claim payload from the hub: {exc!r}") from exc


@dataclass
class Registration:
    node: dict[str, Any]
    agent_key: str
    hub_public_key: str
    heartbeat_interval_s: float

    @property
    def node_id(self) -> int:
        return int(self.node["id"])


@dataclass
class HeartbeatReply:
    poll_interval_s: float
    drain: bool
    leases: dict[str, str]
    cancel: list[str]
    state: str
    benchmark: bool = False


@dataclass
class CompleteReply:
    status: str
    next: Claim | None


class HubClient:
    """One method per endpoint. Safe to share between threads: each thread gets its own session."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = key
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {self._key}"
            session.headers["User-Agent"] = f"computepool-agent/{agent_version()}"
            self._local.session = session
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def close(self) -> None:
        with self._sessions_lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: dict[str, str] | None = None,
        files: dict[str, Any] | None = None,
        read_timeout_s: float | None = None,
    ) -> requests.Response:
        url = f"{self.base_url}{path}"
        timeout = (self._connect_timeout_s, read_timeout_s or self._read_timeout_s)
        try:
            response = self._session().request(
                method, url, json=json_body, data=data, files=files, timeout=timeout
            )
        except requests.Timeout as exc:
            raise HubUnavailable(f"{method} {path}: the hub did not answer in time") from exc
        except requests.ConnectionError as exc:
            raise HubUnavailable(f"{method} {path}: cannot connect to {self.base_url}") from exc
        except requests.RequestException as exc:
            raise HubUnavailable(f"{method} {path}: {exc}") from exc
        if response.status_code >= 400:
            raise _error_for(method, path, response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._request(method, path, **kwargs)
        try:
            payload = response.json()
        except ValueError as exc:
            # Typically a proxy's HTML page in front of a hub that is restarting.
            raise HubUnavailable(
                f"{method} {path}: the answer is not JSON (HTTP {response.status_code})",
                status=response.status_code,
            ) from exc
        if not isinstance(payload, dict):
            raise HubError(f"{method} {path}: expected a JSON object", status=response.status_code)
        return payload

    def register(
        self, *, name: str, region: str | None, capabilities: dict[str, Any]
    ) -> Registration:
        """Called with an operator key; the agent key in the answer is never shown again."""
        body = {"name": name, "region": region, "capabilities": capabilities}
        payload = self._json("POST", "/api/v1/nodes/", json_body=body)
        try:
            return Registration(
                node=dict(payload["node"]),
                agent_key=str(payload["agent_key"]),
                hub_public_key=str(payload["hub_public_key"]),
                heartbeat_interval_s=float(payload.get("heartbeat_interval_s") or 15),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HubError(f"malformed registration answer from the hub: {exc!r}") from exc

    def me(self) -> dict[str, Any]:
        return self._json("GET", "/api/v1/agent/me")

    def model_download(self, name: str, dest: BinaryIO, *, offset: int = 0) -> str:
        """Append model `name`'s file from byte `offset` on to `dest`; returns the sha256 the
        hub states for the whole file (X-Model-Sha256), which the caller must check."""
        path = f"/api/v1/agent/models/{quote(name, safe='/:')}"
        url = f"{self.base_url}{path}"
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        timeout = (self._connect_timeout_s, MODEL_READ_TIMEOUT_S)
        try:
            with self._session().get(url, headers=headers, stream=True, timeout=timeout) as r:
                if r.status_code >= 400:
                    raise _error_for("GET", path, r)
                if offset and r.status_code != 206:
                    raise HubError(f"GET {path}: the hub did not resume at byte {offset}")
                sha256 = r.headers.get("X-Model-Sha256", "")
                if len(sha256) != 64:
                    raise HubError(f"GET {path}: no X-Model-Sha256 in the answer")
                for chunk in r.iter_content(chunk_size=1024 * 1024):
                    dest.write(chunk)
                return sha256.lower()
        except requests.Timeout as exc:
            raise HubUnavailable(f"GET {path}: the hub stopped sending") from exc
        except requests.RequestException as exc:
            raise HubUnavailable(f"GET {path}: {exc}") from exc

    def inference_poll(
        self, state: dict[str, Any], *, wait: int, free: int = 1
    ) -> list[dict[str, Any]]:
        """Report the node's inference state and wait up to `wait` s for requests for it (up
        to `free` of them)."""
        response = self._request(
            "POST",
            "/api/v1/agent/inference/poll",
            json_body={**state, "wait": wait, "free": free},
            read_timeout_s=wait + 15,
        )
        return [] if response.status_code == 204 else list(response.json()["assignments"])

    def inference_push(self, pushes: list[dict[str, Any]]) -> dict[str, str]:
        """Send the next entries of several answers at once ({request_id, attempt, model,
        entries} each); per request id: "ok", "stop" (the hub wants no more) or "refused"
        (this node does not hold it)."""
        answer = self._json("POST", "/api/v1/agent/inference/push", json_body={"pushes": pushes})
        results = answer.get("results")
        return {str(k): str(v) for k, v in results.items()} if isinstance(results, dict) else {}

    def heartbeat(
        self,
        *,
        status: str,
        load: dict[str, Any],
        gpus: list[dict[str, Any]],
        leases: list[str],
        capabilities: dict[str, Any] | None = None,
    ) -> HeartbeatReply:
        body: dict[str, Any] = {"status": status, "load": load, "gpus": gpus, "leases": leases}
        if capabilities is not None:
            body["capabilities"] = capabilities
        payload = self._json("POST", "/api/v1/agent/heartbeat", json_body=body)
        try:
            return HeartbeatReply(
                poll_interval_s=float(payload.get("poll_interval_s") or 0),
                drain=bool(payload.get("drain", False)),
                leases=dict(payload.get("leases") or {}),
                cancel=[str(token) for token in payload.get("cancel") or []],
                state=str(payload.get("state", "")),
                benchmark=bool(payload.get("benchmark", False)),
            )
        except (TypeError, ValueError) as exc:
            raise HubError(f"malformed heartbeat answer from the hub: {exc!r}") from exc

    def benchmark_take(self) -> dict[str, Any] | None:
        """The hardware benchmark the hub has waiting: {id, spec, signature}, or None."""
        response = self._request("GET", "/api/v1/agent/benchmark")
        if response.status_code == 204:
            return None
        try:
            payload = response.json()
            return {
                "id": int(payload["id"]),
                "spec": dict(payload["spec"]),
                "signature": str(payload["signature"]),
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise HubError(f"malformed benchmark from the hub: {exc!r}") from exc

    def benchmark_report(self, benchmark_id: int, report: dict[str, Any]) -> dict[str, Any]:
        """The hub's verdict on a benchmark's report: {state, tier, figures, problems}."""
        return self._json(
            "POST", f"/api/v1/agent/benchmark/{benchmark_id}", json_body={"report": report}
        )

    def claim(self, *, wait: int = 0) -> Claim | None:
        wait = max(0, min(MAX_CLAIM_WAIT_S, int(wait)))
        response = self._request(
            "POST",
            "/api/v1/agent/claim",
            json_body={"wait": wait},
            read_timeout_s=wait + CLAIM_READ_MARGIN_S,
        )
        if response.status_code == 204:
            return None
        try:
            payload = response.json()
        except ValueError as exc:
            raise HubUnavailable("POST /api/v1/agent/claim: the answer is not JSON") from exc
        return Claim.from_payload(payload)

    def progress(
        self, attempt_id: int, *, lease_token: str, progress: int, message: str = ""
    ) -> None:
        body = {"lease_token": lease_token, "progress": progress, "message": message}
        self._request("POST", f"/api/v1/agent/attempts/{attempt_id}/progress", json_body=body)

    def log(self, attempt_id: int, *, lease_token: str, stream: str, seq: int, data: str) -> None:
        body = {"lease_token": lease_token, "stream": stream, "seq": seq, "data": data}
        self._request("POST", f"/api/v1/agent/attempts/{attempt_id}/log", json_body=body)

    def upload_artifact(
        self, attempt_id: int, *, lease_token: str, name: str, sha256: str, path: Path
    ) -> None:
        with path.open("rb") as handle:
            self._request(
                "POST",
                f"/api/v1/agent/attempts/{attempt_id}/artifacts",
                data={"lease_token": lease_token, "name": name, "sha256": sha256},
                files={"file": (name, handle, "application/octet-stream")},
                read_timeout_s=UPLOAD_READ_TIMEOUT_S,
            )

    def complete(
        self,
        attempt_id: int,
        *,
        lease_token: str,
        exit_code: int,
        stdout_tail: str,
        stderr_tail: str,
        artifacts: list[dict[str, Any]],
        reported_runtime_s: float,
        want_next: bool,
    ) -> CompleteReply:
        body = {
            "lease_token": lease_token,
            "exit_code": exit_code,
            "stdout_tail": stdout_tail,
            "stderr_tail": stderr_tail,
            "artifacts": artifacts,
            "reported_runtime_s": reported_runtime_s,
            "want_next": want_next,
        }
        payload = self._json(
            "POST", f"/api/v1/agent/attempts/{attempt_id}/complete", json_body=body
        )
        next_payload = payload.get("next")
        return CompleteReply(
            status=str(payload.get("status", "")),
            next=Claim.from_payload(next_payload) if next_payload else None,
        )

    def fail(
        self,
        attempt_id: int,
        *,
        lease_token: str,
        failure_class: str,
        exit_code: int | None,
        detail: str,
        stdout_tail: str = "",
        stderr_tail: str = "",
        reason: str | None = None,
    ) -> None:
        body = {
            "lease_token": lease_token,
            "failure_class": failure_class,
            "exit_code": exit_code,
            "detail": detail,
            "stdout_tail": stdout_tail,
            "stderr_tail": stderr_tail,
        }
        if reason is not None:
            body["reason"] = reason
        self._request("POST", f"/api/v1/agent/attempts/{attempt_id}/fail", json_body=body)

    def hand_back(self, attempt_id: int, *, lease_token: str, reason: str) -> None:
        """Release the lease now, unfailed: the hub requeues the task at once."""
        body = {"lease_token": lease_token, "reason": reason}
        self._request("POST", f"/api/v1/agent/attempts/{attempt_id}/hand-back", json_body=body)

    def earnings(self, *, utc_offset_min: int = 0) -> dict[str, Any]:
        """The node owner's earnings: today (from local midnight, `utc_offset_min` east of UTC),
        in all, and waiting in cashouts."""
        return self._json("GET", f"/api/v1/agent/earnings?utc_offset_min={int(utc_offset_min)}")


def _error_for(method: str, path: str, response: requests.Response) -> HubError:
    status = response.status_code
    code: str | None = None
    detail = ""
    fields: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        code = body.get("error") if isinstance(body.get("error"), str) else None
        detail = str(body.get("detail") or "")
        fields = body.get("fields") if isinstance(body.get("fields"), dict) else {}
    message = f"{method} {path}: HTTP {status}" + (f" {code}" if code else "")
    if detail:
        message += f": {detail}"
    kwargs: dict[str, Any] = {"status": status, "code": code, "fields": fields}
    if status == 409 and code == "stale_lease":
        return StaleLease(message, **kwargs)
    if status in (401, 403):
        return AuthError(message, **kwargs)
    if status >= 500 or status == 429:
        return HubUnavailable(message, **kwargs)
    return HubRejected(message, **kwargs)
