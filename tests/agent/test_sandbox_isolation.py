"""What every real sandbox guarantees, proved against Docker (runc), gVisor and bubblewrap."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from typing import Any

import pytest

from agent.sandbox import RunRequest, RunResult, Sandbox, SandboxRefused
from agent.sandbox.cgroups import cgroups_v1_usable
from tests.agent.conftest import BUSYBOX, job

# busybox has wget; the host that bubblewrap shows has wget, or bash and its /dev/tcp.
NET_PROBE = (
    "if command -v wget >/dev/null; then timeout 5 wget -q -O- http://127.0.0.1:{port}/; "
    "else timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; "
    'printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3\'; fi'
)


def run(sandbox: Sandbox, req: RunRequest, **kwargs: Any) -> RunResult:
    result = sandbox.run(req, **kwargs)
    assert result.error is None, result.error
    return result


def test_it_runs_the_job_as_nobody_in_the_work_dir(sandbox: Sandbox) -> None:
    result = run(sandbox, job('id -u; id -g; pwd; echo "$GREETING"', env={"GREETING": "hello"}))

    assert result.exit_code == 0
    assert result.stdout_tail.split() == ["65534", "65534", "/work", "hello"]
    result.cleanup()


def test_it_streams_stdout_and_stderr_while_the_job_runs(sandbox: Sandbox) -> None:
    chunks: list[tuple[float, str, bytes]] = []

    result = run(
        sandbox,
        job("echo one; echo two >&2; sleep 2; echo three"),
        on_output=lambda stream, chunk: chunks.append((time.monotonic(), stream, chunk)),
    )

    # Measured here, not from the container's own clock: start-up time under load varies.
    ended = time.monotonic()
    stdout = b"".join(chunk for _, stream, chunk in chunks if stream == "stdout")
    stderr = b"".join(chunk for _, stream, chunk in chunks if stream == "stderr")
    assert (stdout, stderr) == (b"one\nthree\n", b"two\n")
    first = next(at for at, _, chunk in chunks if chunk.startswith(b"one"))
    assert first < ended - 1.0, "output arrived only after the job ended"
    assert (result.stdout_tail, result.stderr_tail) == ("one\nthree\n", "two\n")
    result.cleanup()


def test_it_shows_inputs_read_only_under_in(sandbox: Sandbox) -> None:
    blob = os.urandom(300_000)
    inputs = {"data.bin": blob, "notes/readme.txt": b"read me"}
    script = "sha256sum /in/data.bin; cat /in/notes/readme.txt; echo; echo x >/in/new && echo wrote"

    result = run(sandbox, job(script, inputs=inputs))

    digest_line, readme = result.stdout_tail.splitlines()
    assert digest_line.split()[0] == hashlib.sha256(blob).hexdigest()
    assert readme == "read me"
    result.cleanup()


def test_it_returns_outputs_with_their_checksums(sandbox: Sandbox) -> None:
    blob = os.urandom(500_000)
    script = "cp /in/data.bin /out/copy.bin && mkdir /out/sub && printf known >/out/sub/k.txt"

    result = run(sandbox, job(script, inputs={"data.bin": blob}))

    assert result.exit_code == 0
    outputs = {output.name: output for output in result.outputs}
    assert sorted(outputs) == ["copy.bin", "sub/k.txt"]
    for name, content in (("copy.bin", blob), ("sub/k.txt", b"known")):
        assert outputs[name].size == len(content)
        assert outputs[name].sha256 == hashlib.sha256(content).hexdigest()
        assert outputs[name].path.read_bytes() == content
    result.cleanup()
    assert not outputs["copy.bin"].path.exists()


def test_it_does_not_follow_links_out_of_out(sandbox: Sandbox) -> None:
    script = "ln -s /etc/passwd /out/leak && ln -s / /out/root && echo ok >/out/real"

    result = run(sandbox, job(script))

    assert [output.name for output in result.outputs] == ["real"]
    result.cleanup()


def test_it_refuses_outputs_over_the_cap(sandbox: Sandbox) -> None:
    result = sandbox.run(job("head -c 2000000 /dev/zero >/out/big", max_output_mb=1))

    assert result.error is not None and "limit" in result.error
    assert result.outputs == []
    result.cleanup()


def test_it_stops_a_job_that_floods_out(sandbox: Sandbox) -> None:
    req = job(
        "while :; do cat /in/blob >>/out/big; done",
        inputs={"blob": b"x" * 256 * 1024},
        max_output_mb=1,
        timeout_s=30,
    )

    result = sandbox.run(req)

    assert result.error is not None and "limit" in result.error
    assert not result.timed_out and result.duration_s < 10
    result.cleanup()


def test_it_has_no_network(
    sandbox: Sandbox, host_service: int, request: pytest.FixtureRequest
) -> None:
    probe = NET_PROBE.format(port=host_service)

    result = run(sandbox, job(probe))

    assert "reached" not in result.stdout_tail
    # The same probe with the host's network does get through: it can tell.
    if sandbox.name == "bwrap":
        outside = subprocess.run(["sh", "-c", probe], capture_output=True, check=False).stdout
    else:
        client = request.getfixturevalue("docker_client")
        control = client.containers.run(
            BUSYBOX, ["sh", "-c", probe], network_mode="host", detach=True
        )
        control.wait(timeout=20)
        outside = control.logs()
        control.remove(force=True)
    assert b"reached" in outside
    result.cleanup()


def test_it_cannot_write_outside_work_and_out(sandbox: Sandbox) -> None:
    script = (
        "for d in / /tmp /etc /usr /bin /in /dev; do touch $d/probe 2>/dev/null && echo wrote $d; "
        "done; touch /work/probe && touch /out/probe && echo writable"
    )

    result = run(sandbox, job(script))

    assert result.stdout_tail.split("\n") == ["writable", ""]
    result.cleanup()


def test_it_caps_the_work_dir(sandbox: Sandbox) -> None:
    result = run(sandbox, job("dd if=/dev/zero of=/work/fill bs=64k count=64", work_mb=1))

    assert result.exit_code != 0
    assert "No space left" in result.stderr_tail
    result.cleanup()


def test_it_kills_a_job_over_its_memory_limit(sandbox: Sandbox) -> None:
    if sandbox.name == "bwrap" and not cgroups_v1_usable():
        pytest.skip("without root and cgroup v1, bubblewrap limits address space, not memory")

    result = run(sandbox, job("head -c 300m /dev/zero | tail >/dev/null", memory_mb=32))

    assert result.oom_killed
    result.cleanup()


def test_it_kills_a_job_at_its_timeout(sandbox: Sandbox) -> None:
    result = run(sandbox, job("sleep 60", timeout_s=1))

    assert result.timed_out and not result.cancelled
    assert result.exit_code is None
    assert 0.9 < result.duration_s < 10
    result.cleanup()


def test_it_leaves_no_process_behind(sandbox: Sandbox) -> None:
    result = run(sandbox, job("(sleep 1; echo late >/out/late) & echo early >/out/early"))

    time.sleep(1.5)
    assert [output.name for output in result.outputs] == ["early"]
    assert not (result.outputs[0].path.parent / "late").exists()
    result.cleanup()


def test_it_limits_processes(sandbox: Sandbox) -> None:
    if sandbox.name == "gvisor":
        pytest.skip("gVisor counts its own threads as pids, so no pids limit is set under it")
    script = "i=0; while [ $i -lt 40 ]; do sleep 2 & i=$((i+1)); done; wait"

    result = run(sandbox, job(script, pids=16))

    assert result.exit_code != 0
    assert "fork" in result.stderr_tail.lower()
    result.cleanup()


def test_it_kills_a_cancelled_job(sandbox: Sandbox) -> None:
    cancel = threading.Event()

    def on_output(stream: str, chunk: bytes) -> None:
        if b"started" in chunk:
            cancel.set()

    result = run(sandbox, job("echo started; sleep 60"), on_output=on_output, cancel=cancel)

    assert result.cancelled and not result.timed_out
    assert result.exit_code is None
    assert result.duration_s < 10
    result.cleanup()


def test_it_refuses_an_image_off_the_allow_list(sandbox: Sandbox) -> None:
    seen: list[bytes] = []
    req = RunRequest(image="computepool/python:3", command=["true"], env={}, inputs={}, timeout_s=5)

    with pytest.raises(SandboxRefused, match="allow-list"):
        sandbox.run(req, on_output=lambda stream, chunk: seen.append(chunk))

    assert seen == []


def test_it_runs_jobs_side_by_side(sandbox: Sandbox) -> None:
    results: dict[int, RunResult] = {}

    def one(index: int) -> None:
        results[index] = sandbox.run(job(f"sleep 0.5; echo {index} >/out/me; echo {index}"))

    threads = [threading.Thread(target=one, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for index, result in results.items():
        assert result.stdout_tail == f"{index}\n"
        assert result.outputs[0].path.read_text() == f"{index}\n"
        result.cleanup()
    assert sorted(results) == [0, 1, 2]
