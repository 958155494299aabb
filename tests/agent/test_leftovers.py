"""A SIGKILLed agent leaves its containers and work dirs behind. The next start of that node's
agent removes them, and only them: never another node's, nor anything else on the machine;
`computepool-agent doctor` reports them before that.

What a killed agent left is made here by hand, named as the agent names it (the work dir's
prefix, the container's label), so that these tests also ran against an agent that did not
clean up."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from agent.cli import main
from agent.config import owner_name
from agent.sandbox.docker_sandbox import has_runtime
from tests.agent.conftest import BUSYBOX
from tests.agent.test_cli import NODE as NODE_ON_HUB
from tests.agent.test_cli import REPO, write_config
from tests.agent.test_client import HubStub, hub

__all__ = ["hub"]

NODE = 9  # write_config's node
# What another hub's node 9 names its containers and work dirs: an agent of another hub (a test
# hub beside a real one) may run on the same machine.
OTHER_HUB = owner_name("http://127.0.0.1:1", NODE)


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own temp dir, for the agent processes (TMPDIR) and this one."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def left_work_dirs(root: Path, hub_url: str) -> dict[str, Path]:
    mine = owner_name(hub_url, NODE)
    dirs = {
        "mine": root / f"computepool-job-{mine}-k1ll3d_",
        "another node's": root / f"computepool-job-{owner_name(hub_url, NODE * 11)}-w0rk1ng",
        "another hub's node 9": root / f"computepool-job-{OTHER_HUB}-w0rk1ng",
        "unnamed": root / "computepool-job-0ld5tyle",
        "not ours": root / "photos",
    }
    for path in dirs.values():
        (path / "out").mkdir(parents=True)
        (path / "out" / "r.txt").write_text("half an output\n")
    return dirs


def start_and_stop_an_agent(hub: HubStub, config: Path, root: Path, sandbox: str) -> str:
    """A real agent process: started, then SIGTERMed once its first heartbeat arrived."""
    argv = ["--config", str(config), "run", "--sandbox", sandbox, "--allow-unsandboxed"]
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", *argv],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO), "TMPDIR": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert hub.wait_for(lambda: bool(hub.received("/heartbeat")), timeout=20)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    assert process.returncode == 0, stderr
    return stderr


def test_doctor_reports_the_work_dirs_a_killed_agent_left(
    hub: HubStub, tmp_path: Path, tmp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = left_work_dirs(tmp_root, hub.url)
    config = tmp_path / "agent.json"
    write_config(config, hub.url)

    hub.routes["GET", "/api/v1/agent/me"] = (200, NODE_ON_HUB)
    main(["--config", str(config), "doctor"])

    out = capsys.readouterr().out
    assert (
        f"work dirs:      1 left by an earlier run, removed when it starts: {dirs['mine']}" in out
    )
    assert all(str(path) not in out for name, path in dirs.items() if name != "mine")


def test_a_restarted_agent_removes_only_its_own_work_dirs(
    hub: HubStub, tmp_path: Path, tmp_root: Path
) -> None:
    dirs = left_work_dirs(tmp_root, hub.url)
    config = tmp_path / "agent.json"
    write_config(config, hub.url)

    start_and_stop_an_agent(hub, config, tmp_root, "auto")

    assert not dirs["mine"].exists()
    for name, path in dirs.items():
        if name != "mine":
            assert (path / "out" / "r.txt").exists(), f"{name} was removed"


# -- containers --------------------------------------------------------------------------------


@pytest.fixture
def left_containers(
    docker_client: docker.DockerClient, busybox_image: str, hub: HubStub
) -> Iterator[dict[str, str]]:
    """Exited containers as a SIGKILLed agent leaves them (the agent removes a container only
    after its job), one labelled for another node, one with no labels: name → id."""
    labels = {
        "mine": {"computepool.sandbox": "job", "computepool.node": owner_name(hub.url, NODE)},
        "another node's": {
            "computepool.sandbox": "job",
            "computepool.node": owner_name(hub.url, NODE * 11),
        },
        "another hub's node 9": {"computepool.sandbox": "job", "computepool.node": OTHER_HUB},
        "unlabelled": {},
    }
    made = {}
    try:
        for name, these in labels.items():
            container = docker_client.containers.run(
                busybox_image, ["true"], detach=True, labels=these, network_mode="none"
            )
            container.wait(timeout=30)
            made[name] = container.id
        yield made
    finally:
        for container_id in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.containers.get(container_id).remove(force=True)


def _exists(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


@pytest.mark.docker
def test_doctor_reports_the_containers_a_killed_agent_left(
    hub: HubStub,
    tmp_path: Path,
    tmp_root: Path,
    left_containers: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "agent.json"
    write_config(config, hub.url, sandbox="docker", allowed_images=[BUSYBOX])

    hub.routes["GET", "/api/v1/agent/me"] = (200, NODE_ON_HUB)
    main(["--config", str(config), "doctor"])

    out = capsys.readouterr().out
    mine = left_containers["mine"][:12]
    assert f"containers:     1 left by an earlier run, removed when the agent starts: {mine}" in out
    assert all(cid[:12] not in out for name, cid in left_containers.items() if name != "mine")


@pytest.mark.docker
def test_a_restarted_agent_removes_only_its_own_containers(
    hub: HubStub,
    tmp_path: Path,
    tmp_root: Path,
    docker_client: docker.DockerClient,
    left_containers: dict[str, str],
) -> None:
    config = tmp_path / "agent.json"
    write_config(config, hub.url, sandbox="docker", allowed_images=[BUSYBOX])

    start_and_stop_an_agent(hub, config, tmp_root, "docker")

    assert not _exists(docker_client, left_containers["mine"])
    for name, container_id in left_containers.items():
        if name != "mine":
            assert _exists(docker_client, container_id), f"{name} was removed"


@pytest.mark.docker
def test_a_restarted_agent_removes_a_frozen_warm_container(
    hub: HubStub,
    tmp_path: Path,
    tmp_root: Path,
    docker_client: docker.DockerClient,
    busybox_image: str,
) -> None:
    """A warm container is paused from its job's end until its result is reported: an agent
    killed in between leaves it paused, under gVisor where there is one."""
    runtime = "runsc" if has_runtime(docker_client, "runsc") else None
    labels = {"computepool.sandbox": "warm", "computepool.node": owner_name(hub.url, NODE)}
    frozen = docker_client.containers.run(
        busybox_image,
        ["sleep", "infinity"],
        detach=True,
        labels=labels,
        network_mode="none",
        runtime=runtime,
    )
    try:
        frozen.pause()
        config = tmp_path / "agent.json"
        write_config(config, hub.url, sandbox="docker", allowed_images=[BUSYBOX])

        start_and_stop_an_agent(hub, config, tmp_root, "docker")

        assert not _exists(docker_client, frozen.id)
    finally:
        if _exists(docker_client, frozen.id):
            with contextlib.suppress(docker.errors.APIError):
                frozen.unpause()
            frozen.remove(force=True)


def test_the_sandboxes_name_the_node_as_the_cleanup_looks_for_it(tmp_root: Path) -> None:
    from agent.sandbox.docker_sandbox import container_kwargs
    from agent.sandbox.leftovers import leftovers_find
    from agent.sandbox.workspace import Workspace
    from tests.agent.conftest import job

    owner = owner_name("http://hub.example:8000", NODE)
    workspace = Workspace.create({}, node=owner)
    try:
        labels = container_kwargs(job("true"), workspace, runtime=None, node=owner)["labels"]
        assert labels["computepool.node"] == owner
        assert leftovers_find(owner).work_dirs == [workspace.root]
        assert leftovers_find(OTHER_HUB).work_dirs == []
    finally:
        workspace.remove()
