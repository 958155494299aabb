"""Real isolation for the sandbox tests: a Docker engine, gVisor and bubblewrap where present.

Missing ones skip their tests, except where CI says they must be there: REQUIRE_DOCKER=1,
REQUIRE_GVISOR=1 and REQUIRE_BWRAP=1 turn the skip into a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from docker.errors import ImageNotFound

from agent.sandbox import RunRequest, RunResult, Sandbox, SandboxRefused, SandboxUnavailable
from agent.sandbox.bwrap_sandbox import BwrapSandbox, probe_bwrap
from agent.sandbox.docker_sandbox import RUNSC, DockerSandbox, connect_docker, has_runtime
from agent.sandbox.images import ImagePolicy

ROOT = Path(__file__).resolve().parents[2]
BUSYBOX = "computepool/busybox:1"
TEST_POLICY = ImagePolicy(("computepool/busybox:*",))


def job(script: str, **fields: Any) -> RunRequest:
    """A busybox shell script as a request, with test-sized defaults."""
    fields.setdefault("timeout_s", 20)
    fields.setdefault("env", {})
    fields.setdefault("inputs", {})
    return RunRequest(image=BUSYBOX, command=["sh", "-c", script], **fields)


def _missing(what: str, variable: str, reason: str) -> None:
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {what} is not usable: {reason}")
    pytest.skip(f"{what} is not usable here: {reason}")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = connect_docker()
    except SandboxUnavailable as exc:
        _missing("a Docker engine", "REQUIRE_DOCKER", str(exc))
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_image(docker_client: docker.DockerClient) -> str:
    """Built from Debian's busybox-static on first use (under a second); no registry needed."""
    try:
        docker_client.images.get(BUSYBOX)
    except ImageNotFound:
        build = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build_sandbox_images.sh"), "busybox"],
            capture_output=True,
            text=True,
            check=False,
        )
        if build.returncode != 0:
            pytest.fail(f"could not build {BUSYBOX}:\n{build.stdout}{build.stderr}")
    return BUSYBOX


class Prewarmed(DockerSandbox):
    """The Docker sandbox with its warm pool, where every job finds a container of its shape
    already started: each run takes the pooled path, or fails saying it did not."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._ran = 0

    def run(self, req: RunRequest, **kwargs: Any) -> RunResult:
        assert self.pool is not None
        try:
            self.prestart(req)
        except (SandboxRefused, ImageNotFound):
            return super().run(req, **kwargs)  # refused, as it would be without a pool
        result = super().run(req, **kwargs)
        if req.gpus == 0:
            # Runs side by side may take each other's container: every run took one if the
            # pool served at least as many as have ended.
            with self._lock:
                self._ran += 1
                assert self.pool.served >= self._ran, "a job did not take a warm container"
        return result


def _docker_sandbox(request: pytest.FixtureRequest, kind: str) -> DockerSandbox:
    """`kind`: docker or gvisor, and with "-warm" the same with its warm pool."""
    client = request.getfixturevalue("docker_client")
    request.getfixturevalue("busybox_image")
    runtime = None
    if kind.startswith("gvisor"):
        if not has_runtime(client, RUNSC):
            _missing("gVisor", "REQUIRE_GVISOR", "the engine has no 'runsc' runtime")
        runtime = RUNSC
    if not kind.endswith("-warm"):
        return DockerSandbox(client, policy=TEST_POLICY, runtime=runtime)
    sandbox = Prewarmed(client, policy=TEST_POLICY, runtime=runtime, warm=1)
    request.addfinalizer(sandbox.close)
    return sandbox


DOCKER_KINDS = ["docker", "gvisor", "docker-warm", "gvisor-warm"]


@pytest.fixture(params=DOCKER_KINDS)
def docker_sandbox(request: pytest.FixtureRequest) -> DockerSandbox:
    """The Docker sandbox under runc, then under gVisor; each without and with warm containers."""
    return _docker_sandbox(request, request.param)


@pytest.fixture(scope="session")
def bwrap_sandbox() -> BwrapSandbox:
    try:
        probe_bwrap()
    except SandboxUnavailable as exc:
        _missing("bubblewrap", "REQUIRE_BWRAP", str(exc))
    return BwrapSandbox(policy=TEST_POLICY)


@pytest.fixture
def bwrap() -> None:
    """Bubblewrap installed, for the agent's own processes run under it (agent.sandbox.own_code:
    the inference engine, the hardware benchmark)."""
    if shutil.which("bwrap") is None:
        _missing("bubblewrap", "REQUIRE_BWRAP", "it is not installed")


@pytest.fixture(
    params=[*(pytest.param(kind, marks=pytest.mark.docker) for kind in DOCKER_KINDS), "bwrap"]
)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each kind of real isolation in turn, for what every sandbox must guarantee."""
    if request.param == "bwrap":
        return request.getfixturevalue("bwrap_sandbox")
    return _docker_sandbox(request, request.param)


@pytest.fixture
def host_service() -> Iterator[int]:
    """A TCP port on the host's loopback that answers; a sandboxed job must not reach it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):
                # Read the request first: closing with unread data resets the connection.
                conn.settimeout(2)
                request = b""
                while b"\r\n\r\n" not in request and (data := conn.recv(4096)):
                    request += data
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nreached")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The agent's default state directory (the pause flag, the running agent's verdict) in a
    temporary one, for this process and the agents it starts, never the user's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
