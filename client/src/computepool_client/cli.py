"""`computepool submit | wait | logs | get | cancel | list | status | timeline | quote`.

Exit codes (docs/client.md): 0 done (a job that succeeded), 1 the job failed or was cancelled,
2 bad usage or job file, 3 the hub refused the request, 4 the hub could not be reached or
failed, 5 a download did not match its checksum, 6 `wait --timeout` ran out, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

from computepool_client.client import Client, client_version
from computepool_client.errors import (
    ChecksumMismatch,
    ComputePoolError,
    HubError,
    HubUnavailable,
    JobFileError,
    WaitTimeout,
)
from computepool_client.jobfile import load_job_file
from computepool_client.jobs import Progress, progress_of
from computepool_client.models import ENDED, JobDetail, JobState
from computepool_client.progress import Bar, human_bytes

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_UNAVAILABLE = 4
EXIT_CHECKSUM = 5
EXIT_TIMEOUT = 6
EXIT_INTERRUPTED = 130

HUB_ENV = "COMPUTEPOOL_HUB"
KEY_ENV = "COMPUTEPOOL_KEY"
# A file that gets one JSON line per request sent (never the key): for debugging, and for the
# tests that check every request against the hub's schema.
TRACE_ENV = "COMPUTEPOOL_TRACE"


class UsageError(ComputePoolError):
    pass


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except ComputePoolError as exc:
        print(f"computepool: {exc}", file=sys.stderr)
        return _exit_code(exc)
    return code


EXIT_CODES: dict[type[ComputePoolError], int] = {
    HubError: EXIT_REFUSED,
    HubUnavailable: EXIT_UNAVAILABLE,
    ChecksumMismatch: EXIT_CHECKSUM,
    WaitTimeout: EXIT_TIMEOUT,
    JobFileError: EXIT_USAGE,
    UsageError: EXIT_USAGE,
}


def _exit_code(exc: ComputePoolError) -> int:
    return next(code for kind, code in EXIT_CODES.items() if isinstance(exc, kind))


# --- commands -----------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    spec = load_job_file(args.file)
    client = _client(args)
    job = client.jobs.submit(idempotency_key=args.idempotency_key, **spec)
    if args.json and not (args.wait or args.follow or args.output):
        _print_json(job)
        return EXIT_OK
    if not args.json:
        print(job["id"], flush=True)
    if not (args.wait or args.follow or args.output):
        return EXIT_OK
    if args.follow:
        _print_logs(client, job["id"], follow=True)
    detail = _wait(client, job["id"], args)
    code = _report_end(detail, args)
    if code == EXIT_OK and args.output:
        _download(client, job["id"], args)
    return code


def cmd_wait(args: argparse.Namespace) -> int:
    return _report_end(_wait(_client(args), args.job, args), args)


def cmd_logs(args: argparse.Namespace) -> int:
    _print_logs(_client(args), args.job, follow=args.follow, attempt=args.attempt)
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    client = _client(args)
    paths = _download(client, args.job, args)
    if args.json:
        _print_json([str(p) for p in paths])
    else:
        for path in paths:
            print(path)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    job = _client(args).jobs.cancel(args.job)
    if args.json:
        _print_json(job)
    else:
        stopping = " (its running tasks are stopping)" if job["state"] not in ENDED else ""
        print(f"job {job['id']}: cancel requested, {job['state']}{stopping}")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    jobs = _client(args).jobs.list(state=args.state, limit=args.limit)
    if args.json:
        _print_json(jobs)
        return EXIT_OK
    for job in jobs:
        done = job["tasks_succeeded"] + job["tasks_failed"] + job["tasks_cancelled"]
        print(f"{job['id']}\t{job['state']}\t{done} ended\t{job['created_at']}\t{job['name']}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    job = _client(args).jobs.get(args.job)
    if args.json:
        _print_json(job)
        return EXIT_OK
    progress = progress_of(job)
    print(
        f"job {job['id']} {job['name']!r}: {job['state']}, {progress.done}/{progress.total} "
        f"tasks ended, {progress.percent}%"
    )
    for task in job["tasks"]:
        where = f"slice {task['index']}" + (
            f" replica {task['replica']}" if task["replica"] else ""
        )
        print(f"  {where}: {task['state']}")
        for attempt in task["attempts"]:
            exit_code = "" if attempt["exit_code"] is None else f", exit {attempt['exit_code']}"
            runtime = "" if attempt["runtime_ms"] is None else f", {attempt['runtime_ms']} ms"
            files = ", ".join(a["name"] for a in attempt["artifacts"])
            print(
                f"    attempt {attempt['number']} on node {attempt['node_id']}: "
                f"{attempt['state']} {attempt['progress']}%{exit_code}{runtime}"
                + (f" [{files}]" if files else "")
            )
    return EXIT_OK


def cmd_timeline(args: argparse.Namespace) -> int:
    events = _client(args).jobs.timeline(args.job)
    if args.json:
        _print_json(events)
        return EXIT_OK
    for event in events:
        print(f"{event['recorded_at']}\t{event['stream']}\t{event['type']}\t{event['actor']}")
    return EXIT_OK


def cmd_quote(args: argparse.Namespace) -> int:
    spec = load_job_file(args.file)
    missing = [f for f in ("price_ceiling", "timeout_s") if f not in spec]
    if missing:
        raise UsageError(f"{args.file}: a quote needs {' and '.join(missing)}")
    region = args.region if args.region is not None else spec.get("requirements", {}).get("region")
    quote = _client(args).quote(
        tier=args.tier,
        region=region or "",
        ceiling_per_s_minor=spec["price_ceiling"],
        timeout_s=spec["timeout_s"],
        slices=spec.get("slices", 1),
        replicas=spec.get("verification", {}).get("replicas", 1),
        expected_runtime_s=args.expected_runtime_s,
    )
    if args.json:
        _print_json(quote)
        return EXIT_OK
    print(f"holds at most {quote['max_credits']} credits ({quote['max_minor']} minor units)")
    print(
        f"spot price for {quote['tier']} {quote['region'] or 'anywhere'}: "
        f"{quote['spot_per_s_minor']} minor units per second per task"
        + ("" if quote["within_ceiling"] else ", above the ceiling: no node would take it")
    )
    if quote["expected_credits"] is not None:
        print(f"expected cost: {quote['expected_credits']} credits")
    return EXIT_OK


# --- pieces -------------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> Client:
    hub = args.hub or os.environ.get(HUB_ENV)
    key = os.environ.get(KEY_ENV)
    if not hub:
        raise UsageError(f"no hub: pass --hub or set {HUB_ENV}")
    if not key:
        raise UsageError(f"no API key: set {KEY_ENV}")
    return Client(hub, key, trace=os.environ.get(TRACE_ENV) or None)


def _bar_enabled(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _wait(client: Client, job: int, args: argparse.Namespace) -> JobDetail:
    bar = Bar(f"job {job}", enabled=_bar_enabled(args))

    def show(progress: Progress) -> None:
        bar.update(
            progress.percent / 100,
            f"{progress.state} {progress.done}/{progress.total} tasks",
            force=True,
        )

    try:
        return client.jobs.wait(job, timeout=args.timeout, interval=args.interval, on_progress=show)
    finally:
        bar.close()


def _report_end(job: JobDetail, args: argparse.Namespace) -> int:
    if args.json:
        _print_json(job)
    else:
        progress = progress_of(job)
        print(f"job {job['id']}: {job['state']} ({progress.done}/{progress.total} tasks)")
    return EXIT_OK if job["state"] == "succeeded" else EXIT_JOB_FAILED


def _download(client: Client, job: int, args: argparse.Namespace) -> list[Path]:
    bar = Bar(f"get {job}", enabled=_bar_enabled(args))
    try:
        return client.jobs.download(
            job,
            args.output,
            on_progress=lambda done, total: bar.update(
                done / total if total else 1.0, f"{human_bytes(done)} / {human_bytes(total)}"
            ),
        )
    finally:
        bar.close()


def _print_logs(client: Client, job: int, *, follow: bool, attempt: int | None = None) -> None:
    for chunk in client.jobs.logs(job, follow=follow, attempt=attempt):
        out = sys.stderr if chunk["stream"] == "stderr" else sys.stdout
        out.write(chunk["data"])
        out.flush()


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--hub", help=f"the hub's base URL (default: ${HUB_ENV})")
    common.add_argument("--json", action="store_true", help="print the hub's JSON")
    common.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw a progress bar on stderr (default: when stderr is a terminal)",
    )
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--timeout", type=float, help="give up after this many seconds (exit 6)")
    waiting.add_argument("--interval", type=float, default=1.0, help="seconds between polls")

    parser = argparse.ArgumentParser(
        prog="computepool",
        description=f"Submit jobs to a ComputePool hub. The API key is read from ${KEY_ENV}.",
    )
    parser.add_argument("--version", action="version", version=client_version())
    sub = parser.add_subparsers(required=True, metavar="command")

    def command(
        name: str,
        run: Callable[[argparse.Namespace], int],
        help_text: str,
        *,
        parents: Sequence[argparse.ArgumentParser] = (),
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, parents=[common, *parents], aliases=aliases)
        p.set_defaults(run=run)
        return p

    p = command("submit", cmd_submit, "submit the job a job.yaml describes", parents=[waiting])
    p.add_argument("file", help="job.yaml")
    p.add_argument(
        "--wait", action="store_true", help="wait for the job to end; exit 1 unless it succeeded"
    )
    p.add_argument(
        "-f", "--follow", action="store_true", help="print its logs until it ends (implies --wait)"
    )
    p.add_argument(
        "-o", "--output", help="when it succeeds, download its outputs here (implies --wait)"
    )
    p.add_argument(
        "--idempotency-key", help="submitting again with the same key returns the same job"
    )

    p = command(
        "wait", cmd_wait, "wait for a job to end; exit 1 unless it succeeded", parents=[waiting]
    )
    p.add_argument("job", type=int)

    p = command("logs", cmd_logs, "print a job's logs")
    p.add_argument("job", type=int)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--attempt", type=int, help="only this attempt's")

    p = command(
        "get", cmd_get, "download a job's outputs, checksums verified", aliases=["download"]
    )
    p.add_argument("job", type=int)
    p.add_argument("-o", "--output", default=".", help="the folder to write to (default: .)")

    p = command("cancel", cmd_cancel, "cancel a job")
    p.add_argument("job", type=int)

    p = command("list", cmd_list, "your jobs, newest first")
    p.add_argument("--state", choices=get_args(JobState))
    p.add_argument("--limit", type=int, default=20)

    p = command("status", cmd_status, "a job, its tasks and their attempts")
    p.add_argument("job", type=int)

    p = command("timeline", cmd_timeline, "a job's events, oldest first")
    p.add_argument("job", type=int)

    p = command("quote", cmd_quote, "what the job in a job.yaml would hold and cost")
    p.add_argument("file", help="job.yaml")
    p.add_argument("--tier", required=True, help="the node tier to price it at (cpu, rtx-4090, …)")
    p.add_argument("--region", help="a country code (default: the job's requirements.region)")
    p.add_argument("--expected-runtime-s", type=int, help="for an expected cost besides the hold")
    return parser
