"""The Docker sandbox's own duties, against a real engine under runc and gVisor."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker.errors import NotFound

from agent.sandbox import RunRequest, SandboxRefused
from agent.sandbox.docker_sandbox import LABEL, RUNSC, DockerSandbox, container_kwargs
from agent.sandbox.images import ImagePolicy
from agent.sandbox.workspace import Workspace
from tests.agent.conftest import job

pytestmark = pytest.mark.docker


@pytest.fixture
def workspace() -> Iterator[Workspace]:
    space = Workspace.create({"a.txt": b"a"})
    yield space
    space.remove()


def test_it_removes_the_container_after_a_run(
    docker_sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    result = docker_sandbox.run(job("cat /etc/hostname"))
    result.cleanup()

    container_id = result.stdout_tail.strip()
    assert len(container_id) == 12
    with pytest.raises(NotFound):
        docker_client.containers.get(container_id)


def test_it_removes_the_container_after_a_timeout(
    docker_sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    result = docker_sandbox.run(job("cat /etc/hostname; sleep 60", timeout_s=1))

    result.cleanup()

    assert result.timed_out
    with pytest.raises(NotFound):
        docker_client.containers.get(result.stdout_tail.strip())


def test_it_reports_oom_when_a_child_was_killed_and_the_job_exits_0(
    docker_sandbox: DockerSandbox,
) -> None:
    result = docker_sandbox.run(
        job("(head -c 300m /dev/zero | tail >/dev/null); exit 0", memory_mb=32)
    )

    assert result.oom_killed
    result.cleanup()


def test_it_never_pulls_a_missing_image(docker_sandbox: DockerSandbox) -> None:
    req = RunRequest(
        image="computepool/busybox:absent", command=["true"], env={}, inputs={}, timeout_s=5
    )

    with pytest.raises(SandboxRefused, match="never pulls"):
        docker_sandbox.run(req)


def test_it_turns_an_engine_failure_into_an_error_result(
    docker_sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine can start GPU containers")

    def job_containers() -> set[str]:
        found = docker_client.containers.list(all=True, filters={"label": f"{LABEL}=job"})
        return {container.id for container in found}

    # Another sandbox on the same engine (a warm pool, a second run of the suite) may hold job
    # containers of its own: what counts is that this run leaves none behind.
    before = job_containers()
    # The engine accepts a GPU request at create time and fails it at start without a GPU.
    result = docker_sandbox.run(job("echo ran", gpus=1))

    assert result.error is not None
    assert result.exit_code is None and result.stdout_tail == ""
    assert result.workspace is not None and result.workspace.exists()
    result.cleanup()
    assert job_containers() <= before


def test_it_sets_the_isolation_policy_on_every_container(workspace: Workspace) -> None:
    req = job("true", memory_mb=300, cpus=1.5, pids=64, work_mb=10)

    kwargs = container_kwargs(req, workspace, runtime=None)

    assert kwargs["network_mode"] == "none"
    assert kwargs["read_only"] is True
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["user"] == "65534:65534"
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == "300m"
    assert kwargs["nano_cpus"] == 1_500_000_000
    assert kwargs["pids_limit"] == 64
    assert kwargs["tmpfs"]["/work"].startswith("size=10m,exec,")
    assert [(m["Target"], m["Source"], m["ReadOnly"]) for m in kwargs["mounts"]] == [
        ("/in", str(workspace.in_dir), True),
        ("/out", str(workspace.out_dir), False),
    ]
    assert "runtime" not in kwargs and "device_requests" not in kwargs


def test_it_leaves_the_pids_limit_to_gvisor(workspace: Workspace) -> None:
    kwargs = container_kwargs(job("true"), workspace, runtime=RUNSC)

    assert kwargs["runtime"] == RUNSC
    assert "pids_limit" not in kwargs


@pytest.mark.parametrize("gpus", [-1, 1, 2])
def test_it_requests_gpus_only_when_the_job_needs_them(
    gpus: int,
    workspace: Workspace,
    docker_client: docker.DockerClient,
    busybox_image: str,
) -> None:
    kwargs = container_kwargs(job("true", gpus=gpus), workspace, runtime=None)

    (request,) = kwargs["device_requests"]
    assert (request["Count"], request["Capabilities"]) == (gpus, [["gpu"]])
    # The engine takes the request as built (it fails only at start, with no GPU here).
    container = docker_client.containers.create(**kwargs)
    try:
        (stored,) = container.attrs["HostConfig"]["DeviceRequests"]
        assert (stored["Count"], stored["Capabilities"]) == (gpus, [["gpu"]])
    finally:
        container.remove(force=True)


def test_it_refuses_an_image_before_touching_the_engine(docker_client: docker.DockerClient) -> None:
    sandbox = DockerSandbox(docker_client, policy=ImagePolicy(("computepool/python:3",)))
    before = set(Path(tempfile.gettempdir()).glob("computepool-job-*"))

    with pytest.raises(SandboxRefused):
        sandbox.run(job("true"))

    assert set(Path(tempfile.gettempdir()).glob("computepool-job-*")) == before
