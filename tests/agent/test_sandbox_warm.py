"""Warm containers: started before their job, one job each, limited like any job's container.

What every sandbox guarantees (limits, no network, timeouts, cancellation, suspension) is proved
for pooled jobs too: test_sandbox_isolation and test_sandbox_suspend run against the
docker-warm and gvisor-warm sandboxes of conftest, which fail a job that did not take its warm
container. These are the pool's own duties, against a real engine under runc and gVisor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import docker
import pytest
from docker.errors import NotFound

from agent.sandbox import RunRequest
from agent.sandbox.docker_sandbox import (
    LABEL,
    NODE_LABEL,
    RUNSC,
    DockerSandbox,
    container_kwargs,
    has_runtime,
)
from agent.sandbox.warm_pool import MAX_SHAPES, Shape, WarmContainer
from agent.sandbox.workspace import Workspace
from tests.agent.conftest import TEST_POLICY, _missing, job

pytestmark = pytest.mark.docker

NODE = "warm-test"


@pytest.fixture(params=["docker", "gvisor"])
def pooled(
    request: pytest.FixtureRequest, docker_client: docker.DockerClient, busybox_image: str
) -> Iterator[DockerSandbox]:
    """A Docker sandbox keeping one warm container per shape, under runc, then gVisor."""
    runtime = None
    if request.param == "gvisor":
        if not has_runtime(docker_client, RUNSC):
            _missing("gVisor", "REQUIRE_GVISOR", "the engine has no 'runsc' runtime")
        runtime = RUNSC
    sandbox = DockerSandbox(docker_client, policy=TEST_POLICY, runtime=runtime, node=NODE, warm=1)
    yield sandbox
    sandbox.close()


def _warm(client: docker.DockerClient) -> list[str]:
    filters = {"label": [f"{LABEL}=warm", f"{NODE_LABEL}={NODE}"]}
    return [c.id for c in client.containers.list(all=True, filters=filters)]


def _wait_for_refill(sandbox: DockerSandbox, shape: Shape) -> None:
    assert sandbox.pool is not None
    for _ in range(600):
        if sandbox.pool.idle(shape) == 1:
            return
        time.sleep(0.1)
    raise AssertionError("the pool did not start a container for the next job")


def test_a_warm_container_serves_one_job_and_goes(
    pooled: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    req = job("cat /etc/hostname")
    shape = Shape.of(req, pooled._runtime)
    pooled.prestart(req)

    first = pooled.run(req)
    first_id = first.stdout_tail.strip()
    first.cleanup()
    _wait_for_refill(pooled, shape)
    second = pooled.run(job("cat /etc/hostname"))
    second.cleanup()

    assert pooled.pool is not None and pooled.pool.served == 2
    assert first.exit_code == second.exit_code == 0
    second_id = second.stdout_tail.strip()
    assert len(first_id) == len(second_id) == 12 and first_id != second_id
    for used in (first_id, second_id):
        with pytest.raises(NotFound):
            docker_client.containers.get(used)


def test_the_pool_refills_after_each_job(
    pooled: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    req = job("true", memory_mb=128)
    shape = Shape.of(req, pooled._runtime)
    assert pooled.pool is not None

    cold = pooled.run(req)  # nothing of its shape yet: it starts its own and asks for one
    cold.cleanup()
    _wait_for_refill(pooled, shape)
    (waiting,) = _warm(docker_client)
    warm = pooled.run(job("true", memory_mb=128))
    warm.cleanup()
    _wait_for_refill(pooled, shape)

    assert (cold.exit_code, warm.exit_code, pooled.pool.served) == (0, 0, 1)
    (refilled,) = _warm(docker_client)
    assert refilled != waiting
    pooled.close()
    assert _warm(docker_client) == []


def test_a_warm_container_has_the_limits_of_the_job_it_is_for(
    pooled: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    req = job("true", memory_mb=64, cpus=0.5, pids=32, work_mb=8)
    pooled.prestart(req)
    (warm_id,) = _warm(docker_client)
    space = Workspace.create({})
    try:
        cold = container_kwargs(req, space, runtime=pooled._runtime)
    finally:
        space.remove()

    host = docker_client.api.inspect_container(warm_id)["HostConfig"]
    config = docker_client.api.inspect_container(warm_id)["Config"]
    assert (host["Memory"], host["MemorySwap"]) == (64 * 2**20, 64 * 2**20)
    assert host["NanoCpus"] == cold["nano_cpus"] == 500_000_000
    # One process more than the job's: the idle one, which holds the container up.
    assert host["PidsLimit"] == (None if pooled._runtime == RUNSC else 33)
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert config["User"] == cold["user"]
    assert "size=8m" in host["Tmpfs"]["/work"]


def test_it_keeps_only_the_shapes_used_last(
    pooled: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    for memory_mb in range(64, 64 + 16 * (MAX_SHAPES + 1), 16):
        pooled.prestart(job("true", memory_mb=memory_mb))

    assert len(_warm(docker_client)) == MAX_SHAPES
    first = Shape.of(job("true", memory_mb=64), pooled._runtime)
    assert pooled.pool is not None and pooled.pool.idle(first) == 0


def test_a_gpu_job_never_takes_a_warm_container(pooled: DockerSandbox) -> None:
    pooled.prestart(job("true", gpus=1))

    shape = Shape.of(job("true", gpus=1), pooled._runtime)
    assert pooled.pool is not None and pooled.pool.idle(shape) == 0


def test_a_job_takes_the_container_being_started_for_it(pooled: DockerSandbox) -> None:
    """On a busy engine a second start beside the first would make both slower."""
    assert pooled.pool is not None
    gate = threading.Event()
    start = pooled.pool._start

    def held_at_the_gate(shape: Shape) -> WarmContainer:
        gate.wait()
        return start(shape)

    pooled.pool._start = held_at_the_gate
    cold = pooled.run(job("true", memory_mb=96))  # none yet: one is asked for, and held
    cold.cleanup()
    opening = threading.Timer(0.5, gate.set)
    opening.start()
    warm = pooled.run(job("true", memory_mb=96))
    warm.cleanup()
    opening.join()

    assert (cold.exit_code, warm.exit_code, pooled.pool.served) == (0, 0, 1)


def test_a_warm_job_has_no_more_privilege_than_a_job_in_its_own_container(
    pooled: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    """`docker exec` could give a command what the container's first process lacks."""
    probe = "id; grep -E '^(NoNewPrivs|CapPrm|CapEff|CapBnd|CapAmb|Seccomp)' /proc/self/status"
    alone = DockerSandbox(docker_client, policy=TEST_POLICY, runtime=pooled._runtime)
    pooled.prestart(job(probe))

    warm = pooled.run(job(probe))
    cold = alone.run(job(probe))
    warm.cleanup()
    cold.cleanup()

    assert pooled.pool is not None and pooled.pool.served == 1
    assert warm.stdout_tail == cold.stdout_tail
    assert "uid=65534" in warm.stdout_tail
    assert "CapEff:\t0000000000000000" in warm.stdout_tail


@pytest.fixture
def sleepless_image(docker_client: docker.DockerClient, busybox_image: str) -> Iterator[str]:
    """The busybox image without `sleep`: no idle process can hold its container up."""
    maker = docker_client.containers.run(
        busybox_image, ["rm", "/bin/sleep"], detach=True, network_mode="none"
    )
    try:
        assert maker.wait(timeout=30)["StatusCode"] == 0
        maker.commit("computepool/busybox", "no-sleep")
    finally:
        maker.remove(force=True)
    yield "computepool/busybox:no-sleep"
    docker_client.images.remove("computepool/busybox:no-sleep", force=True)


def test_an_image_that_cannot_idle_runs_its_jobs_in_their_own_containers(
    pooled: DockerSandbox,
    sleepless_image: str,
    docker_client: docker.DockerClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def echo() -> RunRequest:
        return RunRequest(
            image=sleepless_image, command=["echo", "ran"], env={}, inputs={}, timeout_s=20
        )

    results = [pooled.run(echo()) for _ in range(3)]
    for result in results:
        result.cleanup()

    assert [(r.exit_code, r.stdout_tail) for r in results] == [(0, "ran\n")] * 3
    assert pooled.pool is not None and pooled.pool.served == 0
    assert len([r for r in caplog.records if "could not pre-start" in r.getMessage()]) == 1
    assert _warm(docker_client) == []
