"""Files in and out of a sandbox, the output tails and request checks, without any sandbox."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agent.sandbox import RunRequest, SandboxRefused
from agent.sandbox.streams import TAIL_BYTES, OutputSink, TailBuffer
from agent.sandbox.workspace import MAX_OUTPUT_FILES, OutputRejected, Workspace


@pytest.fixture
def workspace() -> Iterator[Workspace]:
    space = Workspace.create({})
    yield space
    space.remove()


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\0b"])
def test_it_refuses_input_names_that_leave_in(name: str) -> None:
    with pytest.raises(SandboxRefused, match="bad input file name"):
        Workspace.create({name: b"x"})


def test_it_refuses_inputs_whose_names_collide() -> None:
    with pytest.raises(SandboxRefused, match="collide"):
        Workspace.create({"a": b"file", "a/b": b"under a file"})


def test_it_lays_out_nested_inputs_readable_by_the_sandbox_user() -> None:
    space = Workspace.create({"dir/sub/x.txt": b"x"})

    path = space.in_dir / "dir" / "sub" / "x.txt"
    assert path.read_bytes() == b"x"
    assert path.stat().st_mode & 0o004 and path.parent.stat().st_mode & 0o005 == 0o005
    space.remove()
    assert not space.root.exists()


def test_it_refuses_more_outputs_than_the_hub_takes(workspace: Workspace) -> None:
    for index in range(MAX_OUTPUT_FILES + 1):
        (workspace.out_dir / f"f{index}").touch()

    with pytest.raises(OutputRejected, match="entries"):
        workspace.collect(max_output_mb=64)


def test_it_counts_bytes_across_subdirectories(workspace: Workspace) -> None:
    (workspace.out_dir / "d").mkdir()
    (workspace.out_dir / "d" / "big").write_bytes(b"x" * (1024 * 1024 + 1))
    os.symlink("/dev/zero", workspace.out_dir / "zero")

    assert workspace.output_usage() == (1024 * 1024 + 1, 3)
    with pytest.raises(OutputRejected, match="over the 1 MiB"):
        workspace.collect(max_output_mb=1)


def test_a_tail_keeps_the_last_bytes_and_replaces_broken_utf8() -> None:
    tail = TailBuffer()
    tail.write(b"\xff" + b"a" * (3 * TAIL_BYTES))
    tail.write("é".encode() + b"end")

    text = tail.text()
    assert text.endswith("éend")
    assert len(text.encode()) == TAIL_BYTES
    broken = TailBuffer(limit=5)
    broken.write("ééé".encode())  # six bytes: the cut falls inside the first character
    assert broken.text() == "\ufffdéé"


def test_a_failing_callback_is_dropped_but_the_tail_goes_on() -> None:
    calls: list[bytes] = []

    def callback(stream: str, chunk: bytes) -> None:
        calls.append(chunk)
        raise RuntimeError("hub down")

    sink = OutputSink(callback)
    sink.feed("stdout", b"one ")
    sink.feed("stdout", b"two")

    assert calls == [b"one "]
    assert sink.tail("stdout") == "one two"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("command", []),
        ("timeout_s", 0),
        ("memory_mb", 4),
        ("cpus", 0),
        ("pids", 0),
        ("work_mb", 0),
        ("gpus", -2),
        ("max_output_mb", -1),
        ("env", {"A=B": "x"}),
    ],
)
def test_it_refuses_requests_no_sandbox_could_honour(field: str, value: object) -> None:
    fields: dict[str, object] = {
        "image": "computepool/busybox:1",
        "command": ["true"],
        "env": {},
        "inputs": {},
        "timeout_s": 5,
    }
    fields[field] = value

    with pytest.raises(SandboxRefused):
        RunRequest(**fields).check()  # type: ignore[arg-type]
