"""Time to result: a zero-work job (`exit 0`) from its POST /api/v1/jobs/ to its job succeeded,
through a real hub and a real agent process running it in a real sandbox, on an idle fleet of
one node. Jobs go one at a time: each is submitted once the previous one has succeeded and the
agent has been idle for `--gap` seconds (its warm container, if any, started again meanwhile).

The total is the hub's `finished_at` of the job less the moment the POST was sent (one clock:
both are this machine's). Its parts: dispatch (POST sent → the attempt's lease, on the hub),
then the agent's own account of the attempt (its log line at the end of each attempt):
prepare (spec checks, the start's report), sandbox start (the sandbox asked → the job's process
started), run, sandbox stop (outputs, the container killed and removed) and report (the
completion's round trip). Each sandbox runs with its warm containers off (`warm 0`) and on
(`warm 1`, Docker and gVisor only); spot-checks are off (one would wait for a second node).

    .venv/bin/python -m bench.time_to_result [--jobs 30] [--sandboxes bwrap,docker,gvisor]
        [--warm 0,1] [--gap 1.0]
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common

PARTS = ("prepare", "sandbox start", "run", "sandbox stop", "report")
TIMING = re.compile(r"attempt (\d+) .*succeeded in .*; (prepare .*)$")
PART = re.compile(r"([a-z ]+) (\d+) ms")
JOB = {
    "name": "zero-work",
    "kind": "script",
    "script": "exit 0",
    "slices": 1,
    "timeout_s": 60,
    "price_ceiling": 500,
    "requirements": {"cpu_cores": 1, "ram_mb": 256},
}
JOB_WAIT_S = 60.0


class Agent:
    """A real agent process (`python -m agent run`) for one seeded node, logging to a file."""

    def __init__(self, hub: common.Hub, key: str, node_id: int, sandbox: str, warm: int) -> None:
        from nodes.signing import hub_public_key_b64

        self.dir = Path(tempfile.mkdtemp(prefix="bench-agent-"))
        self.log = self.dir / "agent.log"
        self.config = self.dir / "agent.json"
        self.config.write_text(
            json.dumps(
                {
                    "hub_url": f"http://127.0.0.1:{hub.port}",
                    "node_id": node_id,
                    "agent_key": key,
                    "hub_public_key": hub_public_key_b64(),
                    "work_dir": str(self.dir / "work"),
                    "state_dir": str(self.dir / "state"),
                    "sandbox": sandbox,
                    "warm_containers": warm,
                    "inference": False,
                    "heartbeat_interval_s": 15.0,
                }
            )
        )
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Agent":
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [common.PYTHON, "-m", "agent", "--config", str(self.config), "run"],
                cwd=common.ROOT,
                env={**os.environ, "PYTHONPATH": str(common.ROOT)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while "connected to hub" not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the agent did not connect:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def timings(self) -> dict[int, dict[str, float]]:
        """Each succeeded attempt's parts, in ms, from the agent's log."""
        found = {}
        for line in self.log.read_text(errors="replace").splitlines():
            match = TIMING.search(line)
            if match:
                parts = dict(PART.findall(match.group(2)))
                found[int(match.group(1))] = {k.strip(): float(v) for k, v in parts.items()}
        return found


def run_jobs(hub: common.Hub, sub_key: str, count: int, gap: float) -> list[dict[str, float]]:
    """Submit `count` jobs one at a time; per job: its total, dispatch and attempt id."""
    import requests

    from jobs.models import Attempt, Job

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {sub_key}"
    rows = []
    for _ in range(count):
        time.sleep(gap)
        sent = time.time()
        created = session.post(f"http://127.0.0.1:{hub.port}/api/v1/jobs/", json=JOB, timeout=30)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        deadline = time.monotonic() + JOB_WAIT_S
        while True:
            state, finished = Job.objects.values_list("state", "finished_at").get(pk=job_id)
            if state in ("succeeded", "failed", "cancelled"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job_id} still {state} after {JOB_WAIT_S:g} s")
            time.sleep(0.005)
        if state != "succeeded":
            raise RuntimeError(f"job {job_id} {state}")
        attempt = Attempt.objects.filter(task__job_id=job_id, state="succeeded").get()
        rows.append(
            {
                "attempt": attempt.pk,
                "total": 1000 * (finished.timestamp() - sent),
                "dispatch": 1000 * (attempt.leased_at.timestamp() - sent),
            }
        )
    common.close_django_connections()
    return rows


def measure(
    hub: common.Hub, sub_key: str, sandbox: str, warm: int, args: argparse.Namespace, salt: str
) -> list[str]:
    ops = common.operators(1, prefix=f"op-{salt}-")
    (node_id,), (key,) = common.seed_nodes(1, operator_ids=ops, kind="cpu", salt=salt)
    with Agent(hub, key, node_id, sandbox, warm) as agent:
        time.sleep(1.0)  # the agent's first claim is waiting
        rows = run_jobs(hub, sub_key, args.jobs, args.gap)
        time.sleep(0.5)  # the last attempt's log line
        timings = agent.timings()
    missing = [row["attempt"] for row in rows if row["attempt"] not in timings]
    if missing:
        raise RuntimeError(f"no timing line for attempts {missing}; see {agent.log}")
    if not args.keep:
        shutil.rmtree(agent.dir, ignore_errors=True)
    totals = [row["total"] for row in rows]
    parts = {part: [timings[row["attempt"]].get(part, 0.0) for row in rows] for part in PARTS}
    shares = [parts["sandbox start"][i] / row["total"] for i, row in enumerate(rows)]
    return [
        f"{sandbox} warm {warm}",
        f"{common.pct(totals, 50):.0f}",
        f"{common.pct(totals, 99):.0f}",
        f"{common.pct([row['dispatch'] for row in rows], 50):.0f}",
        *(f"{common.pct(parts[part], 50):.0f}" for part in PARTS),
        f"{100 * common.pct(shares, 50):.0f} %",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--sandboxes", default="", help="default: each this machine has")
    parser.add_argument("--warm", default="0,1", help="warm containers per shape, each in turn")
    parser.add_argument("--gap", type=float, default=1.0, help="idle seconds between jobs")
    parser.add_argument("--keep", action="store_true", help="keep the database and agent logs")
    args = parser.parse_args()
    common.banner("time to result: a zero-work job from submit to succeeded, through an agent")
    from agent.sandbox import available_sandboxes

    found = [name for name in available_sandboxes() if name != "none"]
    sandboxes = args.sandboxes.split(",") if args.sandboxes else found[::-1]
    if {"docker", "gvisor"} & set(sandboxes):
        # Script jobs run in this image; no registry is reached for it.
        subprocess.run(
            ["bash", "scripts/build_sandbox_images.sh", "busybox"],
            cwd=common.ROOT,
            check=True,
            capture_output=True,
        )
    warms = [int(w) for w in args.warm.split(",")]
    db = common.create_db("time_to_result")
    common.django_setup(db)
    _, sub_key = common.submitter()
    common.close_django_connections()
    # A spot-check would wait for a second node to run the slice again.
    hub = common.Hub(
        db, workers=2, threads=8, env={"JOB_SPOTCHECK_MIN_PCT": "0", "JOB_SPOTCHECK_MAX_PCT": "0"}
    )
    print(
        f"hub: {hub.describe()}; one agent at a time, {args.jobs} zero-work jobs each, "
        f"one at a time, {args.gap:g} s apart; sandboxes here: {', '.join(found)}"
    )
    rows = []
    with hub:
        for sandbox in sandboxes:
            for warm in warms if sandbox in ("docker", "gvisor") else [0]:
                rows.append(measure(hub, sub_key, sandbox, warm, args, f"{sandbox}{warm}"))
                print(f"  {rows[-1][0]}: p50 {rows[-1][1]} ms")
    print()
    common.table(
        rows,
        [
            "submit → succeeded, ms",
            "p50",
            "p99",
            "dispatch",
            *PARTS,
            "start share",
        ],
    )
    print("  parts are p50s of each part (they need not add up to the total's p50)")
    if not args.keep:
        common.drop_db(db)


if __name__ == "__main__":
    main()
