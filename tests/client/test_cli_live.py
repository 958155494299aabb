"""The `computepool` command against a live hub with a real agent: a job submitted from a
job.yaml runs to the end, its logs are followed, its outputs downloaded with their checksums
verified; failures, cancels and refusals end with their exit codes. Every request the command
sent is then checked against the schema the live hub serves."""

import json
import re
from pathlib import Path

import pytest
import requests

from ledger.funding import credits_grant
from people.services import api_key_create, user_create
from tests.client.conftest import ROOT, Cli
from tests.client.schema import request_problems
from tests.e2e.test_job_run import start_agent

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DOC = (ROOT / "docs" / "client.md").read_text()
# The examples of docs/client.md, run as they are written there.
JOB_YAML = re.search(r"```yaml\n(.*?)```", DOC, re.S).group(1)
LIBRARY_EXAMPLE = re.search(r"```python\n(.*?)```", DOC, re.S).group(1)
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

    quoted = _ok(cli("quote", "job.yaml", "--tier", "cpu", cwd=tmp_path))
    assert quoted.startswith("holds at most 600.00 credits (60000 minor units)\n")

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

    # All at once, as docs/client.md shows it: submit, follow, wait, download.
    whole = _ok(cli("submit", "job.yaml", "--wait", "-f", "-o", "again", cwd=tmp_path))
    lines = whole.splitlines()
    assert lines[-1] == f"job {lines[0]}: succeeded (2/2 tasks)"
    assert {"slice 0 of 2", "slice 1 of 2"} <= set(lines)
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == ["upper-0.txt", "upper-1.txt"]

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
    timed_out = cli("wait", str(queued), "--timeout", "0")
    assert (timed_out.returncode, timed_out.stderr) == (
        6,
        f"computepool: job {queued} is still queued\n",
    )
    assert _ok(cli("cancel", str(queued))) == f"job {queued}: cancel requested, cancelled\n"
    cancelled = cli("wait", str(queued))
    assert (cancelled.returncode, cancelled.stdout) == (1, f"job {queued}: cancelled (1/1 tasks)\n")
    assert cancelled.stderr == ""  # no bar: stderr is not a terminal and --progress was not given

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


def test_the_library_as_the_docs_show_it(
    live_stack, tmp_path, client_src_on_path, monkeypatch, capsys
):
    from computepool_client import Client, Progress

    cli = _submitter(live_stack, tmp_path)
    monkeypatch.chdir(tmp_path)
    example = LIBRARY_EXAMPLE.replace('"http://127.0.0.1:8000"', repr(live_stack.url))
    example = example.replace('"cpk_…"', repr(cli.key))
    assert example.count(cli.key) == 1
    namespace: dict = {}
    exec(example, namespace)  # noqa: S102 - the documented example, run as written
    assert capsys.readouterr().out == "hello\n"
    assert namespace["paths"] == [Path("out/out.txt")]
    assert Path("out/out.txt").read_bytes() == b"hello\n"

    # The same submission with the same key is the same job, however often it is sent.
    client = Client(live_stack.url, cli.key, trace=cli.trace)
    spec = {"kind": "script", "script": "exit 0", "timeout_s": 60, "price_ceiling": 500}
    job = client.jobs.submit(idempotency_key="python-api", **spec)
    assert client.jobs.submit(idempotency_key="python-api", **spec)["id"] == job["id"]
    seen: list[Progress] = []
    assert client.jobs.wait(job, on_progress=seen.append)["state"] == "succeeded"
    assert seen[-1] == Progress("succeeded", 1, 1, 100)
    assert [j["id"] for j in client.jobs.list()] == [job["id"], namespace["job"]["id"]]

    # In pages of two: a log followed while it is written, across pages and re-reads of the
    # last one, comes out whole and once; the timeline and the list read the same as in one.
    small = Client(live_stack.url, cli.key, trace=cli.trace, page_size=2)
    slow = small.jobs.submit(
        kind="script",
        script="for i in 1 2 3 4 5 6; do echo line $i; sleep 0.4; done",
        timeout_s=60,
        price_ceiling=500,
    )
    followed = "".join(c["data"] for c in small.jobs.logs(slow, follow=True, interval=0.2))
    assert followed == "".join(f"line {i}\n" for i in range(1, 7))
    assert len(list(client.jobs.logs(slow))) >= 3  # it did span pages
    assert small.jobs.timeline(slow) == client.jobs.timeline(slow)
    assert len(client.jobs.timeline(slow)) > 2
    assert small.jobs.list(limit=10) == client.jobs.list()
    assert len(client.jobs.list()) == 3
    assert cli.key not in cli.trace.read_text()
    _check_trace_against_served_schema(cli, live_stack.url)


def _check_trace_against_served_schema(cli: Cli, hub: str) -> None:
    schema = requests.get(f"{hub}/api/v1/schema?format=json", timeout=10).json()
    sent = [json.loads(line) for line in cli.trace.read_text().splitlines()]
    assert sent
    problems = {f"{s['method']} {s['path']}": request_problems(schema, s) for s in sent}
    assert {k: v for k, v in problems.items() if v} == {}
