"""Choosing a sandbox on the real machine: what answers here, and what happens when it doesn't."""

from __future__ import annotations

import logging

import docker
import pytest

from agent.sandbox import SandboxUnavailable, available_sandboxes, select_sandbox
from agent.sandbox.bwrap_sandbox import BwrapSandbox
from agent.sandbox.docker_sandbox import RUNSC, has_runtime


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    """An engine address where nothing listens, as on a machine without Docker."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch, no_docker: None, tmp_path: object) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))


def test_it_refuses_an_unknown_preference() -> None:
    with pytest.raises(SandboxUnavailable, match="choose one of"):
        select_sandbox(preference="chroot")


def test_it_runs_unsandboxed_only_with_the_flag(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(SandboxUnavailable, match="allow_unsandboxed"):
        select_sandbox(preference="none")

    with caplog.at_level(logging.WARNING, logger="agent.sandbox"):
        sandbox = select_sandbox(preference="none", allow_unsandboxed=True)

    assert sandbox.name == "none"
    assert "WITHOUT A SANDBOX" in caplog.text


def test_it_refuses_a_blank_allow_list_entry() -> None:
    with pytest.raises(SandboxUnavailable, match="allowed_images"):
        select_sandbox(preference="none", allowed_images=[" "], allow_unsandboxed=True)


@pytest.mark.docker
def test_auto_prefers_gvisor_then_docker(docker_client: docker.DockerClient) -> None:
    expected = "gvisor" if has_runtime(docker_client, RUNSC) else "docker"

    assert select_sandbox().name == expected
    assert select_sandbox(preference="docker").name == "docker"
    found = available_sandboxes()
    assert found[0] == expected and "docker" in found


def test_without_docker_auto_falls_back_to_bubblewrap(
    no_docker: None, bwrap_sandbox: BwrapSandbox
) -> None:
    assert select_sandbox().name == "bwrap"
    assert "docker" not in available_sandboxes()


def test_without_docker_asking_for_it_says_why(no_docker: None) -> None:
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers"):
        select_sandbox(preference="docker")
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers"):
        select_sandbox(preference="gvisor")


def test_with_nothing_available_it_refuses_unless_allowed(nothing_installed: None) -> None:
    with pytest.raises(SandboxUnavailable) as refused:
        select_sandbox()

    message = str(refused.value)
    assert "docker:" in message and "bwrap:" in message and "allow_unsandboxed" in message
    assert select_sandbox(allow_unsandboxed=True).name == "none"
    assert available_sandboxes() == ["none"]
