"""Jobs in Docker containers through the docker SDK, under runc or gVisor's runsc."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import DeviceRequest, LogConfig, Mount

from agent.sandbox.base import (
    INPUT_DIR,
    OUTPUT_DIR,
    SANDBOX_GID,
    SANDBOX_UID,
    WORK_DIR,
    RunRequest,
    RunResult,
    SandboxError,
    SandboxRefused,
    SandboxUnavailable,
    job_env,
)
from agent.sandbox.common import SandboxBase
from agent.sandbox.images import ImagePolicy
from agent.sandbox.streams import OutputSink
from agent.sandbox.supervision import Stop, Supervision, build_result, supervise
from agent.sandbox.warm_pool import Shape, WarmContainer, WarmPool
from agent.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

RUNSC = "runsc"
ENGINE_ERRORS = (DockerException, requests.RequestException)
# The engine keeps a container's output on the host's disk too; a chatty job must not fill it.
LOG_CONFIG = LogConfig(type=LogConfig.types.JSON, config={"max-size": "1m", "max-file": "1"})
KILL_GRACE_S = 10.0
READER_JOIN_S = 5.0
# A command run in a warm container ends when its output does, unless a child it left in the
# background holds the output open: then the engine is asked this often whether it has ended.
EXEC_POLL_S = 0.5
EXEC_EXIT_POLL_S = 0.01
LABEL = "computepool.sandbox"
# The node whose agent made the container: a restarted agent removes what a killed one left.
NODE_LABEL = "computepool.node"


def connect_docker(timeout_s: float = 30.0) -> docker.DockerClient:
    """A client for the engine named by the environment (DOCKER_HOST or the local socket)."""
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except ENGINE_ERRORS as exc:
        raise SandboxUnavailable(
            f"no Docker engine answers ({exc}); start Docker (scripts/ensure_docker.sh does it "
            "on Debian) or give this user access to its socket"
        ) from exc
    return client


def has_runtime(client: docker.DockerClient, runtime: str) -> bool:
    try:
        return runtime in (client.info().get("Runtimes") or {})
    except ENGINE_ERRORS:
        return False


def container_kwargs(
    req: RunRequest, workspace: Workspace, *, runtime: str | None, node: str | None = None
) -> dict[str, Any]:
    """Everything `containers.create` gets for one job: the whole isolation policy in one place."""
    kwargs: dict[str, Any] = {
        "image": req.image,
        "command": req.command,
        "environment": job_env(req),
        "working_dir": WORK_DIR,
        "user": f"{SANDBOX_UID}:{SANDBOX_GID}",
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": f"{req.memory_mb}m",
        "memswap_limit": f"{req.memory_mb}m",
        "nano_cpus": int(req.cpus * 1e9),
        # Docker ignores `mode=` on a tmpfs here, so the sandbox user is made its owner instead.
        "tmpfs": {
            WORK_DIR: f"size={req.work_mb}m,exec,uid={SANDBOX_UID},gid={SANDBOX_GID}",
            # gVisor would mount a writable /tmp of its own; TMPDIR points jobs at /work.
            "/tmp": "ro,size=16k",  # noqa: S108 (inside the container)
        },
        # put_archive/get_archive cannot reach a tmpfs, so files move through host directories.
        "mounts": [
            Mount(INPUT_DIR, str(workspace.in_dir), type="bind", read_only=True),
            Mount(OUTPUT_DIR, str(workspace.out_dir), type="bind"),
        ],
        "log_config": LOG_CONFIG,
        "labels": {LABEL: "job", **({NODE_LABEL: node} if node else {})},
    }
    if runtime is not None:
        kwargs["runtime"] = runtime
    # gVisor counts its own threads against the pids limit, so it would starve the job.
    if runtime != RUNSC:
        kwargs["pids_limit"] = req.pids
    if req.gpus != 0:
        kwargs["device_requests"] = [DeviceRequest(count=req.gpus, capabilities=[["gpu"]])]
    return kwargs


class _Waiter(threading.Thread):
    """Blocks in the engine's wait call, so the supervisor can watch the clock and cancel."""

    def __init__(self, container: Container, timeout_s: float | None) -> None:
        super().__init__(name=f"wait-{container.id[:12]}", daemon=True)
        self.container = container
        self.timeout_s = timeout_s
        self.done = threading.Event()
        self.status: int | None = None
        self.error: str | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        try:
            self.status = int(self.container.wait(timeout=self.timeout_s)["StatusCode"])
        except ENGINE_ERRORS as exc:
            self.error = f"lost track of the container: {exc}"
        finally:
            self.ended_at = time.monotonic()
            self.done.set()


class _ExecWaiter(threading.Thread):
    """Watches a command run in a warm container until it ends; its output goes to the sink
    from a reader thread of its own, which outlives it when a background child holds it."""

    def __init__(
        self,
        client: docker.DockerClient,
        exec_id: str,
        stream: Iterable[tuple[bytes | None, bytes | None]],
        sink: OutputSink,
    ) -> None:
        super().__init__(name=f"exec-{exec_id[:12]}", daemon=True)
        self._api = client.api
        self._exec_id = exec_id
        self.reader = threading.Thread(
            target=_pump, args=(stream, sink), name=f"out-{exec_id[:12]}", daemon=True
        )
        self.done = threading.Event()
        self.status: int | None = None
        self.error: str | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        self.reader.start()
        settle = EXEC_EXIT_POLL_S
        try:
            while True:
                self.reader.join(EXEC_POLL_S)
                try:
                    state = self._api.exec_inspect(self._exec_id)
                except NotFound:
                    # The engine forgets a container's commands when the container stops: it
                    # was killed (a timeout, a cancel) or died (out of memory): no exit code.
                    break
                if not state["Running"]:
                    self.status = state["ExitCode"]
                    break
                if not self.reader.is_alive():
                    # The output ended a moment before the engine recorded the exit, or the
                    # command closed its output and runs on: asked again sooner, then less often.
                    time.sleep(settle)
                    settle = min(2 * settle, EXEC_POLL_S)
        except ENGINE_ERRORS as exc:
            self.error = f"lost track of the job's command: {exc}"
        finally:
            self.ended_at = time.monotonic()
            self.done.set()


def _pump(stream: Iterable[tuple[bytes | None, bytes | None]], sink: OutputSink) -> None:
    try:
        for stdout, stderr in stream:
            if stdout:
                sink.feed("stdout", stdout)
            if stderr:
                sink.feed("stderr", stderr)
    except Exception as exc:
        # The end of a reader thread: whatever broke the stream, the tails so far stand.
        log.warning("the job's output stream broke off: %s", exc)


class DockerSandbox(SandboxBase):
    """One container per job; the engine does the isolation, this class sets and watches it.

    With `warm` > 0, that many containers of each shape in use are kept started ahead of their
    jobs (agent.sandbox.warm_pool); a job runs in one with `exec`, and GPU jobs never do."""

    start_errors = ENGINE_ERRORS
    start_error = "Docker engine"

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        policy: ImagePolicy,
        runtime: str | None = None,
        node: str | None = None,
        warm: int = 0,
    ) -> None:
        super().__init__(policy=policy, node=node)
        self.name = "gvisor" if runtime == RUNSC else "docker"
        self._client = client
        self._runtime = runtime
        self.pool = (
            WarmPool(size=warm, start=self._start_warm, discard=self._discard_warm)
            if warm > 0
            else None
        )

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def prestart(self, req: RunRequest) -> None:
        """Start a warm container for `req`'s shape now, so that the next such job takes it;
        a request that would be refused is refused here too."""
        req.check()
        self._policy.check(req.image)
        if self.pool is not None and req.gpus == 0:
            self.pool.prestart(Shape.of(req, self._runtime))

    def _workspace(self, req: RunRequest) -> Workspace:
        warm = None
        if self.pool is not None and req.gpus == 0:
            warm = self.pool.take(Shape.of(req, self._runtime))
        if warm is None:
            return super()._workspace(req)
        try:
            warm.container.reload()
            if warm.container.status != "running":
                raise SandboxError(f"it is {warm.container.status}")
            warm.fill(req.inputs)
        except (SandboxError, *ENGINE_ERRORS) as exc:
            self._discard_warm(warm)
            if isinstance(exc, SandboxRefused):
                raise
            log.warning("warm container %s unusable (%s)", warm.container.id[:12], exc)
            return super()._workspace(req)
        except BaseException:
            self._discard_warm(warm)
            raise
        return warm

    def _start_warm(self, shape: Shape) -> WarmContainer:
        workspace = Workspace.empty(node=self._node)
        try:
            kwargs = container_kwargs(
                shape.idle_request(), workspace, runtime=shape.runtime, node=self._node
            )
            kwargs["labels"][LABEL] = "warm"
            container = self._client.containers.create(**kwargs)
            try:
                container.start()
                container.reload()
                if container.status != "running":
                    raise SandboxError(f"its idle process ({container.status}) needs `sleep`")
            except BaseException:
                self._remove(container)
                raise
        except BaseException:
            workspace.remove()
            raise
        return WarmContainer(workspace.root, container)

    def _discard_warm(self, warm: WarmContainer) -> None:
        self._remove(warm.container)
        warm.remove()

    def _preflight(self, req: RunRequest) -> RunResult | None:
        try:
            self._client.images.get(req.image)
        except ImageNotFound as exc:
            raise SandboxRefused(
                f"image {req.image!r} is not on this machine and the agent never pulls; "
                "build or load it first"
            ) from exc
        except ENGINE_ERRORS as exc:
            return RunResult.infrastructure_error(f"Docker engine: {exc}")
        return None

    def _runtime_for(self, req: RunRequest) -> str | None:
        if req.gpus != 0 and self._runtime == RUNSC:
            # gVisor reaches no GPU without nvproxy, which the engine's runsc is not set up for.
            log.warning("GPU job: running it under runc, as gVisor cannot reach the GPU")
            return None
        return self._runtime

    def _execute(
        self,
        req: RunRequest,
        workspace: Workspace,
        sink: OutputSink,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> RunResult:
        if isinstance(workspace, WarmContainer):
            return self._execute_warm(req, workspace, sink, cancel, hold)
        created_at = time.time()
        kwargs = container_kwargs(req, workspace, runtime=self._runtime_for(req), node=self._node)
        container = self._client.containers.create(**kwargs)
        try:
            # Attached before start, so not a byte of early output is missed.
            stream = self._client.api.attach(
                container.id, stdout=True, stderr=True, stream=True, logs=True, demux=True
            )
            reader = threading.Thread(
                target=_pump, args=(stream, sink), name=f"out-{container.id[:12]}", daemon=True
            )
            reader.start()
            # A job may be suspended for longer than it may run; then only the supervisor, which
            # does not count suspended time, bounds the wait.
            waiter = _Waiter(
                container, timeout_s=None if hold else req.timeout_s + KILL_GRACE_S + 30
            )
            container.start()
            started_at = time.monotonic()
            waiter.start()
            log.info("job started in container %s (%s)", container.id[:12], self.name)

            supervision = self._supervise(container, waiter.done, req, workspace, cancel, hold)
            if supervision.stop is not Stop.EXITED:
                log.info("job in %s: %s; killing it", container.id[:12], supervision.stop.value)
                self._kill(container)
                if not waiter.done.wait(KILL_GRACE_S):
                    raise DockerException(f"container {container.id[:12]} survived a kill")
            reader.join(READER_JOIN_S)
            if reader.is_alive():
                stream.close()
            return self._result(
                supervision, req, workspace, sink, container, waiter, created_at, started_at
            )
        finally:
            self._remove(container)

    def _execute_warm(
        self,
        req: RunRequest,
        warm: WarmContainer,
        sink: OutputSink,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> RunResult:
        """The job's command in a container started before it came, which goes with it: the
        result holds the container, frozen, until its cleanup() removes it."""
        container = warm.container
        since = time.time()
        result = None
        frozen = False
        try:
            exec_id = self._client.api.exec_create(
                container.id,
                req.command,
                environment=job_env(req),
                workdir=WORK_DIR,
                user=f"{SANDBOX_UID}:{SANDBOX_GID}",
            )["Id"]
            stream = self._client.api.exec_start(exec_id, stream=True, demux=True)
            started_at = time.monotonic()
            waiter = _ExecWaiter(self._client, exec_id, stream, sink)
            waiter.start()
            log.info("job started in warm container %s (%s)", container.id[:12], self.name)

            supervision = self._supervise(container, waiter.done, req, warm, cancel, hold)
            if supervision.stop is Stop.EXITED:
                # Whatever the job left running in the background stops here, before its
                # outputs are read, as if it had been the container's first process.
                frozen = self._freeze(container)
            else:
                log.info("job in %s: %s; killing it", container.id[:12], supervision.stop.value)
                self._kill(container)
            if not waiter.done.wait(KILL_GRACE_S):
                raise DockerException(f"container {container.id[:12]} survived a kill")
            waiter.reader.join(READER_JOIN_S)
            result = self._result(
                supervision, req, warm, sink, container, waiter, since, started_at
            )
            result.release = lambda: self._remove(container, frozen=frozen)
            return result
        finally:
            if result is None:
                self._remove(container, frozen=frozen)

    def _result(
        self,
        supervision: Supervision,
        req: RunRequest,
        workspace: Workspace,
        sink: OutputSink,
        container: Container,
        waiter: _Waiter | _ExecWaiter,
        since: float,
        started_at: float,
    ) -> RunResult:
        """`since`: the time.time() from which an out-of-memory kill would be the job's."""
        if waiter.error is not None:
            raise DockerException(waiter.error)
        return build_result(
            supervision,
            req=req,
            workspace=workspace,
            sink=sink,
            exit_code=waiter.status,
            oom_killed=self._oom_killed(container, since=since),
            duration_s=waiter.ended_at - started_at,
            started_at=started_at,
        )

    @staticmethod
    def _freeze(container: Container) -> bool:
        """Pause the container; False where nothing runs in it any more (its idle process
        died with the job). runc answers such a pause 409; gVisor, whose sandbox can stop with
        a job its memory limit killed, 500 ("in state stopped"): the container's own state
        tells them apart from a real failure."""
        try:
            container.pause()
        except APIError as exc:
            if exc.status_code == 409:
                return False
            container.reload()
            if container.status != "running":
                return False
            raise
        return True

    @staticmethod
    def _supervise(
        container: Container,
        exited: threading.Event,
        req: RunRequest,
        workspace: Workspace,
        cancel: threading.Event | None,
        hold: threading.Event | None,
    ) -> Supervision:
        return supervise(
            exited,
            req=req,
            workspace=workspace,
            cancel=cancel,
            hold=hold,
            freeze=lambda on: container.pause() if on else container.unpause(),
        )

    def _oom_killed(self, container: Container, *, since: float) -> bool:
        """The engine's OOMKilled flag can lose a race with the exit event (a child killed by
        the OOM killer often leaves exit code 0), so its event log is asked as well."""
        if self._client.api.inspect_container(container.id)["State"].get("OOMKilled"):
            return True
        events = self._client.api.events(
            since=since - 1,
            until=time.time(),
            filters={"container": container.id, "event": "oom"},
            decode=True,
        )
        return any(True for _ in events)

    @staticmethod
    def _kill(container: Container) -> None:
        try:
            container.kill()
        except NotFound:
            pass
        except APIError as exc:
            # 409: it exited on its own between the decision and the kill.
            if exc.status_code != 409:
                raise

    @staticmethod
    def _remove(container: Container, *, frozen: bool = False) -> None:
        if frozen:
            # A paused container cannot be killed under every runtime (gVisor's): it is
            # resumed for the moment it takes to remove it.
            try:
                container.unpause()
            except ENGINE_ERRORS as exc:
                log.warning("could not resume container %s: %s", container.id[:12], exc)
        try:
            container.remove(force=True)
        except NotFound:
            pass
        except ENGINE_ERRORS as exc:
            log.warning("could not remove container %s: %s", container.id[:12], exc)
