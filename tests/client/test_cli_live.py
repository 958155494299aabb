"""The `computepool` command against a live hub with a real agent: a job submitted from a
job.yaml runs to the end, its logs are followed, its outputs downloaded with their checksums
verified; failures, cancels and refusals end with their exit codes. Every request the command
sent is then checked against the schema the live hub serves."""

import hashlib
import json
from pathlib import Path

import pytest
import requests

from ledger.funding import credits_grant
from people.services import api_key_create, user_create
from tests.client.conftest import Cli
from tests.client.schema import request_problems
from tests.e2e.test_job_run import start_agent

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

JOB_YAML = """\
name: shout
kind: script
script: |
  echo "slice $CP_SLICE_INDEX of $CP_SLICE_COUNT"
  echo "CP_PROGRESS 50 halfway"
  tr a-z A-Z < "$COMPUTEPOOL_IN/words.txt" > "$COMPUTEPOOL_OUT/upper-$CP_SLICE_INDEX.txt"
  echo "slice $CP_SLICE_INDEX done" >&2
slices: 2
timeout_s: 60
price_ceiling: 500
requirements:
  cpu_cores: 1
  ram_mb: 256
inputs:
  words.txt: data/words.txt
"""
WORDS = b"pooled compute\n"


def _submitter(live_stack, tmp_path: Path, *, agent: bool = True) -> Cli:
    operator = user_create(username="cli-op", roles=["operator"])
    submitter = user_create(username="cli-sub", roles=["submitter"])
    _, op_key = api_key_create(user=operator, role="operator", name="cli")
    _, sub_key = api_key_create(user=submitter, role="submitter", name="cli")
    credits_grant(
        user_id=submitter.pk, amount=1_000_000, actor="test", reference="cli", idempotency_key="cli"
    )
    if agent:
        start_agent(live_stack, tmp_path, op_key, name="cli-rig", region="IN")
    return Cli(hub=live_stack.url, key=sub_key, trace=tmp_path / "trace.jsonl")


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_a_job_file_runs_to_its_outputs_through_the_command(live_stack, tmp_path: Path):
    cli = _submitter(live_stack, tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "words.txt").write_bytes(WORDS)
    (tmp_path / "job.yaml").write_text(JOB_YAML)

    quote = json.loads(_ok(cli("quote", "job.yaml", "--tier", "cpu", "--json", cwd=tmp_path)))
    assert quote["max_minor"] == 500 * 60 * 2
    assert (quote["tier"], quote["region"]) == ("cpu", "")

    job = int(_ok(cli("submit", "job.yaml", cwd=tmp_path)))
    followed = cli("logs", "-f", str(job))
    assert _ok(followed).count("\n") >= 2
    assert {"slice 0 of 2", "slice 1 of 2"} <= set(followed.stdout.splitlines())
    assert {"slice 0 done", "slice 1 done"} <= set(followed.stderr.splitlines())

    waited = cli("wait", str(job), "--progress")
    assert _ok(waited) == f"job {job}: succeeded (2/2 tasks)\n"
    assert f"job {job} [{'#' * 24}] 100% succeeded 2/2 tasks" in waited.stderr

    got = cli("get", str(job), "-o", str(tmp_path / "out"), "--progress")
    assert _ok(got).split() == [str(tmp_path / "out" / f"upper-{i}.txt") for i in range(2)]
    assert "30 B / 30 B" in got.stderr
    for i in range(2):
        assert (tmp_path / "out" / f"upper-{i}.txt").read_bytes() == WORDS.upper()
    assert not list((tmp_path / "out").glob(".*.part"))

    status = _ok(cli("status", str(job)))
    assert status.startswith(f"job {job} 'shout': succeeded, 2/2 tasks ended, 100%")
    assert "[upper-0.txt]" in status
    listed = _ok(cli("list", "--state", "succeeded")).splitlines()
    assert [line.split("\t")[:2] for line in listed] == [[str(job), "succeeded"]]
    timeline = [line.split("\t")[2] for line in _ok(cli("timeline", str(job))).splitlines()]
    assert timeline[0] == "JobSubmitted"
    assert timeline.count("AttemptSucceeded") == 2

    # A job whose script fails: --wait ends with 1.
    (tmp_path / "fails.yaml").write_text(
        "kind: script\nscript: exit 3\ntimeout_s: 30\nprice_ceiling: 500\nmax_attempts: 1\n"
    )
    failed = cli("submit", "fails.yaml", "--wait", cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.splitlines()[1].endswith(": failed (1/1 tasks)")

    # A job no node can take stays queued until it is cancelled; waiting on it then ends with 1.
    (tmp_path / "gpu.yaml").write_text(
        "kind: script\nscript: nvidia-smi\ntimeout_s: 30\nprice_ceiling: 10\n"
        "requirements: {gpu_tiers: [rtx-4090]}\n"
    )
    queued = int(_ok(cli("submit", "gpu.yaml", cwd=tmp_path)))
    assert _ok(cli("cancel", str(queued))) == f"job {queued}: cancel requested, cancelled\n"
    cancelled = cli("wait", str(queued))
    assert (cancelled.returncode, cancelled.stdout) == (1, f"job {queued}: cancelled (1/1 tasks)\n")

    _check_trace_against_served_schema(cli, live_stack.url)


def test_refusals_are_one_line_with_the_hubs_code_and_their_exit_code(live_stack, tmp_path):
    cli = _submitter(live_stack, tmp_path, agent=False)
    (tmp_path / "bad.yaml").write_text(
        "kind: script\nscript: exit 0\nslices: 0\nprice_ceiling: 1\n"
    )
    refused = cli("submit", "bad.yaml", cwd=tmp_path)
    assert refused.returncode == 3
    assert refused.stderr == (
        "computepool: 400 invalid: Invalid input. "
        "(slices: Ensure this value is greater than or equal to 1.)\n"
    )

    (tmp_path / "typo.yaml").write_text("kind: script\nscript: exit 0\ntimeout: 5\n")
    typo = cli("submit", "typo.yaml", cwd=tmp_path)
    assert typo.returncode == 2
    assert typo.stderr.startswith("computepool: typo.yaml: unknown field(s) timeout; a job takes")

    unknown_key = cli("status", "1", key="cpk_not_a_key")
    assert (unknown_key.returncode, unknown_key.stderr.count("\n")) == (3, 1)
    assert unknown_key.stderr.startswith("computepool: 401 authentication_failed: ")

    missing = cli("wait", "999999")
    assert (missing.returncode, missing.stderr) == (3, "computepool: 404 not_found: Not found.\n")

    down = Cli(hub="http://127.0.0.1:9", key=cli.key, trace=cli.trace)("status", "1")
    assert down.returncode == 4
    assert (
        down.stderr == "computepool: http://127.0.0.1:9: refused or unreachable (ConnectionError)\n"
    )


def test_the_python_api_submits_follows_and_downloads(live_stack, tmp_path, client_src_on_path):
    from computepool_client import Client

    cli = _submitter(live_stack, tmp_path)
    client = Client(live_stack.url, cli.key, trace=cli.trace)
    job = client.jobs.submit(
        kind="script",
        script='cat "$COMPUTEPOOL_IN/a.txt"; cp "$COMPUTEPOOL_IN/a.txt" "$COMPUTEPOOL_OUT/out.txt"',
        inputs={"a.txt": b"hello\n"},
        timeout_s=60,
        price_ceiling=500,
        idempotency_key="python-api",
    )
    again = client.jobs.submit(
        kind="script",
        script='cat "$COMPUTEPOOL_IN/a.txt"; cp "$COMPUTEPOOL_IN/a.txt" "$COMPUTEPOOL_OUT/out.txt"',
        inputs={"a.txt": b"hello\n"},
        timeout_s=60,
        price_ceiling=500,
        idempotency_key="python-api",
    )
    assert again["id"] == job["id"]
    seen = []
    assert "".join(c["data"] for c in client.jobs.logs(job, follow=True)) == "hello\n"
    done = client.jobs.wait(job, on_progress=seen.append)
    assert done["state"] == "succeeded"
    assert seen[-1].percent == 100
    (path,) = client.jobs.download(done, tmp_path / "out")
    assert path.read_bytes() == b"hello\n"
    artifact = done["tasks"][0]["attempts"][-1]["artifacts"][0]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact["sha256"]
    _check_trace_against_served_schema(cli, live_stack.url)


def _check_trace_against_served_schema(cli: Cli, hub: str) -> None:
    schema = requests.get(f"{hub}/api/v1/schema?format=json", timeout=10).json()
    sent = [json.loads(line) for line in cli.trace.read_text().splitlines()]
    assert sent
    problems = {f"{s['method']} {s['path']}": request_problems(schema, s) for s in sent}
    assert {k: v for k, v in problems.items() if v} == {}
