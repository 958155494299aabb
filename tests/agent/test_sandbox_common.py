"""What every sandbox's run does the same way (SandboxBase), seen through bubblewrap with no
bubblewrap installed: a request it cannot serve is refused before anything runs."""

from __future__ import annotations

import pytest

from agent.sandbox import RunRequest, SandboxRefused
from agent.sandbox.bwrap_sandbox import BwrapSandbox
from agent.sandbox.images import ImagePolicy

POLICY = ImagePolicy(("computepool/*",))


def job(**fields: object) -> RunRequest:
    return RunRequest(
        image="computepool/busybox:1",
        command=["true"],
        env={},
        inputs={},
        timeout_s=5,
        **fields,
    )


@pytest.fixture
def sandbox(tmp_path) -> BwrapSandbox:
    return BwrapSandbox(policy=POLICY, bwrap=str(tmp_path / "no-bwrap"), cgroups=False)


def test_it_refuses_before_writing_a_file(sandbox: BwrapSandbox) -> None:
    with pytest.raises(SandboxRefused, match="no GPU"):
        sandbox.run(job(gpus=1))
    with pytest.raises(SandboxRefused):
        sandbox.run(
            RunRequest(image="elsewhere/x:1", command=["true"], env={}, inputs={}, timeout_s=5)
        )
