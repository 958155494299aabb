"""The operator's allow-list of images."""

from __future__ import annotations

import pytest

from agent.sandbox import SandboxRefused
from agent.sandbox.images import ImagePolicy, normalize_image


@pytest.mark.parametrize(
    ("image", "normal"),
    [
        ("busybox", "busybox:latest"),
        ("computepool/python:3", "computepool/python:3"),
        ("localhost:5000/team/app", "localhost:5000/team/app:latest"),
        ("app@sha256:" + "a" * 64, "app@sha256:" + "a" * 64),
    ],
)
def test_it_reads_an_untagged_image_as_latest(image: str, normal: str) -> None:
    assert normalize_image(image) == normal


@pytest.mark.parametrize(
    ("patterns", "image", "allowed"),
    [
        (["computepool/python:3"], "computepool/python:3", True),
        (["computepool/python:3"], "computepool/python:3.12", False),
        (["computepool/python:3"], "computepool/python", False),
        (["computepool/python:*"], "computepool/python:3.12", True),
        (["computepool/python:*"], "computepool/python-evil:1", False),
        (["computepool/*"], "computepool/busybox:1", True),
        (["computepool/*"], "computepool-evil/busybox:1", False),
        (["busybox"], "busybox:latest", True),
        (["busybox:latest"], "busybox", True),
        ([], "computepool/busybox:1", False),
        (["computepool/*"], "", False),
        (["computepool/*"], "computepool/x:1 --privileged", False),
    ],
)
def test_it_matches_exact_names_and_prefix_patterns(
    patterns: list[str], image: str, allowed: bool
) -> None:
    assert ImagePolicy.from_list(patterns).allows(image) is allowed


def test_without_a_list_only_the_projects_images_run() -> None:
    policy = ImagePolicy.from_list(None)

    assert policy.allows("computepool/python:3")
    with pytest.raises(SandboxRefused, match="allow-list"):
        policy.check("python:3")


def test_it_rejects_blank_entries() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        ImagePolicy.from_list(["computepool/*", ""])
