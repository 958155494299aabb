"""Chaos on a live stack: real agents running real jobs while their world breaks around them.

Three agent processes run script jobs through a real sandbox, on a hub, worker and beat whose
PostgreSQL is a cluster of this test's own (`private_postgres`: it is really stopped, crashed and
started, which the machine's shared server cannot be). One fault at a time, and the tasks each
one interrupted run again to the end before the next (the kills count as one):

1-2. agents A and B are SIGKILLed at random points of their attempts, and started again, until
     one kill has landed mid-job and one mid-upload. The points come from a seeded RNG (the seed
     is printed; CHAOS_SEED=<seed> repeats them); where each kill landed is read from the hub's
     records once it has fenced the dead agent's attempt, not assumed;
3-4. the hub is SIGKILLed and started again with the same command, then the Celery worker;
5.   PostgreSQL stops (fast shutdown) while attempts run and stays down longer than a lease
     while the agents go on running and reporting (the hub answers 503 on /healthz and 500 to
     the agents, who retry with backoff), then starts again; nothing else is restarted;
6.   agent C is frozen (SIGSTOP) past its lease and thawed once its task succeeded elsewhere;
7.   PostgreSQL crashes (immediate shutdown) while attempts run, and recovers from its WAL.

Afterwards every task ended exactly once (succeeded once, or failed after its attempts ran out),
every attempt settled once, every interrupted attempt paid nothing, the thawed agent was refused
(409) and stopped, hub, worker and beat are still up, beat sealed the log and `manage.py
verify_ledger` passes. Every wait is bounded.
"""

import contextlib
import json
import os
import random
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
import requests
from django.db import connection
from django.db.models import Count, Sum

from agent.sandbox.docker_sandbox import LABEL
from jobs.models import Artifact, Attempt, Job, Task
from ledger.accounts import available_code
from ledger.funding import credits_grant
from ledger.models import Account, Event, EventSeal
from people.services import api_key_create, user_create
from tests.e2e.test_job_run import sandbox_args

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

GRANT = 10_000_000
# Each slice sleeps, then writes three outputs big enough that uploading them takes a while:
# the window in which an agent is killed "mid-upload".
SCRIPT = """\
echo "slice $CP_SLICE_INDEX of $CP_SLICE_COUNT"
sleep {sleep}
for part in a b c; do
  head -c 6000000 /dev/urandom > "$COMPUTEPOOL_OUT/$part-$CP_SLICE_INDEX.bin"
done
"""
OUTPUTS = 3
SLEEP_S = 1.5  # the first job's slices: the kills happen during it
ACTIVE = ("leased", "running")
# The hub as a deployment runs it (docker-compose.yml): threaded workers, so that idle agents'
# long-polling claims do not occupy every worker and starve heartbeats.
THREADED = ["-k", "gthread", "--threads", "8"]
# Leases reaped within a second of expiring; a requeued task is claimable at once. Three lost
# attempts in a row cool a node down (reliability policy): here agents lose attempts on purpose
# (kills, a frozen agent), so a cool-down lasts seconds, not 15 minutes, or the last agent
# standing would be left to run everything alone. (The leases the database outage lapses do not
# count against their nodes: the hub heard no heartbeat then.)
CHAOS_ENV = {"JOB_REAPER_INTERVAL_S": "1", "JOB_RETRY_BACKOFF_S": "0", "NODE_COOLDOWN_S": "3"}
# Kills go on until both have landed; a seed that needs more than this is a failure to report.
MAX_KILLS = 6
# Outputs arrive ≈0.1 s apart here (the summary line reports the median): a kill within this
# much of one arriving often lands while the next is on its way, else it is tried again.
UPLOAD_GAP_S = 0.1
OUTAGE_S = 6  # PostgreSQL down: longer than a lease (5 s), so leases lapse in it


def chaos_seed() -> int:
    raw = os.environ.get("CHAOS_SEED", "").strip()
    return int(raw) if raw else random.SystemRandom().randrange(2**32)


class Fleet:
    def __init__(
        self, stack, tmp_path: Path, scratch: Path, operator_key: str, sandbox: list[str]
    ) -> None:
        self.stack, self.tmp_path, self.sandbox = stack, tmp_path, sandbox
        self.scratch, self.operator_key = scratch, operator_key
        self.node_ids: dict[str, int] = {}

    def _argv(self, name: str) -> list[str]:
        return ["-m", "agent", "--config", str(self.tmp_path / f"{name}.json")]

    def register(self, name: str) -> None:
        config = self.tmp_path / f"{name}.json"
        done = self.stack.run(
            [
                *self._argv(name),
                "register",
                "--hub",
                self.stack.url,
                "--token",
                self.operator_key,
                "--name",
                name,
                "--region",
                "IN",
            ]
        )
        assert done.returncode == 0, done.stdout + done.stderr
        settings = json.loads(config.read_text())
        settings |= {
            "work_dir": str(self.tmp_path / f"work-{name}"),
            "allowed_images": ["computepool/*"],
        }
        config.write_text(json.dumps(settings))
        self.node_ids[name] = settings["node_id"]

    def start(self, name: str) -> None:
        # Job workspaces go to this run's scratch directory: a killed agent leaves its behind.
        env = {**self.stack.env, "TMPDIR": str(self.scratch)}
        self.stack.spawn(name, [*self._argv(name), "run", *self.sandbox], env=env)

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")


def running_attempt(
    node_id: int, *, outputs: int | None = None, job: int | None = None
) -> int | None:
    """The node's newest running attempt (of `job`, if given): with at least `outputs` outputs
    in, or with none when `outputs` is 0, or whatever it has when None."""
    attempts = Attempt.objects.filter(node_id=node_id, state="running")
    if job is not None:
        attempts = attempts.filter(task__job_id=job)
    if outputs is not None:
        attempts = attempts.annotate(n=Count("artifacts"))
        attempts = attempts.filter(n__gte=outputs) if outputs else attempts.filter(n=0)
    return attempts.order_by("-id").values_list("id", flat=True).first()


def restart(stack, name: str, extra: list[str] | None = None) -> None:
    argv = stack.procs[name].args[1:] + (extra or [])
    stack.kill(name)
    stack.spawn(name, argv)


def hub_health(stack) -> int:
    return requests.get(f"{stack.url}/healthz", timeout=2).status_code


def hub_answers(stack) -> bool:
    return hub_health(stack) == 200


@dataclass
class Kill:
    agent: str
    aim: str  # "anywhere", "mid-job" or "mid-upload"
    after: str  # the moment the delay is counted from
    delay_s: float
    attempt: int
    landed: str = ""  # read from the hub's records once the agent is dead

    def __str__(self) -> str:
        return f"{self.agent} {self.delay_s:.2f}s after {self.after} -> {self.landed}"


def landed(attempt_id: int) -> str:
    """Where a kill landed, from what the hub holds for the dead agent's attempt: never
    completed and no output in (mid-job), never completed with outputs in (mid-upload), or
    completed."""
    state = Attempt.objects.filter(pk=attempt_id).values_list("state", flat=True).get()
    if state == "succeeded":
        return "after completion"
    assert state in (*ACTIVE, "lost", "failed"), (attempt_id, state)
    return "mid-upload" if Artifact.objects.filter(attempt_id=attempt_id).exists() else "mid-job"


def kill_at_random(stack, fleet, rng: random.Random, aim: str, top_up: Callable[[], None]) -> Kill:
    """SIGKILL agent A or B (picked by `rng`) at a random point of a running attempt, restart
    it, and record where the kill landed.

    anywhere: up to the slice's sleep and a second more after the attempt starts running, so
    mid-job, mid-upload or after completion; mid-job: within the sleep; mid-upload: within
    UPLOAD_GAP_S of its first or second output arriving. The aim only picks the window.
    `top_up` submits more work when little is left queued."""
    top_up()
    agent = rng.choice(("agent-a", "agent-b"))
    node = fleet.node_ids[agent]
    if aim == "mid-upload":
        outputs = rng.randint(1, OUTPUTS - 1)
        after, delay = f"output {outputs} arrived", rng.uniform(0, UPLOAD_GAP_S)
    else:
        outputs, after = 0, "the attempt started"
        delay = rng.uniform(0, SLEEP_S + (1 if aim == "anywhere" else 0))
    attempt = stack.wait_until(
        f"{agent} to be at {after} (aiming {aim})",
        lambda: running_attempt(node, outputs=outputs),
        timeout=60,
        every=0.01,
    )
    time.sleep(delay)
    stack.kill(agent)
    fleet.start(agent)
    # A first reading, once a request the agent had sent in full has had time to land; `fence`
    # makes it final.
    time.sleep(1)
    return Kill(agent, aim, after, delay, attempt, landed=landed(attempt))


def fence(stack, kills: list[Kill]) -> None:
    """Read where every kill landed again once the hub has ended the dead agents' attempts
    (completed, or lease lapsed and reaped): nothing they sent can land on them after that."""
    attempts = [kill.attempt for kill in kills]
    stack.wait_until(
        "the killed agents' attempts to end",
        lambda: not Attempt.objects.filter(pk__in=attempts, state__in=ACTIVE).exists(),
        timeout=60,
    )
    for kill in kills:
        kill.landed = landed(kill.attempt)


def kills_seen(kills: list[Kill]) -> str:
    return "; ".join(str(kill) for kill in kills)


def unfinished(jobs: list[int]) -> str:
    """The tasks of `jobs` that have not ended, with their attempts: for a failure's report."""
    rows = []
    for task in Task.objects.filter(job_id__in=jobs).exclude(state__in=("succeeded", "failed")):
        attempts = Attempt.objects.filter(task=task).order_by("number")
        rows.append(
            f"task {task.pk} {task.state}, nodes excluded {task.excluded_nodes!r}, attempts "
            f"(id, node, state) {list(attempts.values_list('id', 'node_id', 'state'))}"
        )
    return "\n".join(rows) or "none"


def wait_for_tasks(stack, jobs: list[int], what: str, probe, *, timeout: float) -> None:
    try:
        stack.wait_until(what, probe, timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nunfinished tasks:\n{unfinished(jobs)}") from None


def settle(stack, jobs: list[int], fault: str) -> None:
    """Wait until every task that lost an attempt (or had one fail) has ended: one fault at a
    time, each one's interrupted tasks run again to the end before the next. (Without this, one
    task can lose an attempt on each of the three nodes, and a lost attempt bars its node from
    the task for good: see docs/security.md, findings.)"""
    interrupted = Task.objects.filter(job_id__in=jobs, attempt_set__state__in=("lost", "failed"))
    wait_for_tasks(
        stack,
        jobs,
        f"the tasks that {fault} interrupted to end",
        lambda: not interrupted.exclude(state__in=("succeeded", "failed")).exists(),
        timeout=90,
    )


def busy(stack, jobs: list[int]) -> int:
    """Wait until at least two attempts run; returns how many do."""

    def running() -> int:
        n = Attempt.objects.filter(task__job_id__in=jobs, state="running").count()
        return n if n >= 2 else 0

    return stack.wait_until("at least two attempts to be running", running, timeout=60)


def server_errors_met(fleet) -> int:
    """How many of the agents' calls to the hub got a 5xx, which they retry: the hub's answer
    while its database is gone (a hub that is down refuses connections instead)."""
    return sum(fleet.log(name).count(": HTTP 5") for name in fleet.node_ids)


def remove_containers(marker: str) -> None:
    """A killed agent never removes its job's container: remove this run's (found by the
    marker in their environment), whatever state they are in."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        found = client.containers.list(all=True, filters={"label": LABEL})
    except Exception:  # no engine: no containers
        return
    for container in found:
        if marker in (container.attrs.get("Config", {}).get("Env") or []):
            with contextlib.suppress(Exception):
                container.remove(force=True)


def submit(session, url: str, *, slices: int, sleep: float, marker: str) -> int:
    created = session.post(
        f"{url}/api/v1/jobs/",
        json={
            "name": f"chaos-{slices}",
            "kind": "script",
            "script": SCRIPT.format(sleep=sleep),
            "slices": slices,
            "timeout_s": 60,
            "max_attempts": 5,
            "price_ceiling": 500,
            "env": {"PROOF_RUN": marker.split("=", 1)[1]},
        },
        timeout=10,
    )
    assert created.status_code == 201, created.text
    return created.json()["id"]


@pytest.mark.timeout(480)
def test_every_task_ends_exactly_once_through_kills_restarts_and_outages(
    monkeypatch, request, private_postgres, tmp_path: Path, capsys
):
    from tests.e2e import conftest as e2e

    seed = chaos_seed()
    laps: list[str] = []
    started = time.monotonic()

    def lap(phase: str) -> None:
        nonlocal started
        laps.append(f"{phase} {time.monotonic() - started:.0f}")
        started = time.monotonic()

    rng = random.Random(seed)
    with capsys.disabled():
        print(f"\n  chaos seed {seed} (CHAOS_SEED={seed} repeats this run's kill points)")
    request.node.user_properties.append(("chaos_seed", seed))
    pg = private_postgres
    for name, value in CHAOS_ENV.items():
        monkeypatch.setitem(e2e.FAST, name, value)
    # On the private cluster, as the test process now is (requested after private_postgres).
    stack = request.getfixturevalue("live_stack")
    marker = f"PROOF_RUN={uuid.uuid4().hex}"
    # Not under pytest's base directory, which is private to its owner: a sandbox must be able
    # to reach the job's bind mounts, as in /tmp, where agents put them by default.
    scratch = Path(tempfile.mkdtemp(prefix="computepool-proof-"))
    scratch.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    request.addfinalizer(lambda: remove_containers(marker))
    # Start the hub as a deployment does; "restarting" it below repeats this command.
    restart(stack, "hub", THREADED)
    stack.wait_until("the threaded hub", lambda: hub_answers(stack), timeout=30)

    operator = user_create(username="chaos-op", roles=["operator"])
    submitter = user_create(username="chaos-sub", roles=["submitter"])
    _, op_key = api_key_create(user=operator, role="operator", name="chaos")
    _, sub_key = api_key_create(user=submitter, role="submitter", name="chaos")
    credits_grant(
        user_id=submitter.pk, amount=GRANT, actor="test", reference="chaos", idempotency_key="c"
    )
    fleet = Fleet(stack, tmp_path, scratch, op_key, sandbox_args())
    for name in ("agent-a", "agent-b", "agent-c"):
        fleet.register(name)
        fleet.start(name)
    c = fleet.node_ids["agent-c"]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {sub_key}"
    jobs = [submit(session, stack.url, slices=12, sleep=SLEEP_S, marker=marker)]

    def top_up() -> None:
        if Task.objects.filter(job_id__in=jobs, state="queued").count() < 3:
            jobs.append(submit(session, stack.url, slices=6, sleep=SLEEP_S, marker=marker))

    lap("setup")

    # 1-2. Agents A and B die at random points of their attempts and are started again: a lost
    # attempt runs again elsewhere. One kill anywhere, then aimed kills until one has landed
    # mid-job (no output in) and one mid-upload (an output in, the completion never sent).
    kills: list[Kill] = []
    wanted = {"mid-job", "mid-upload"}
    while missing := wanted - {k.landed for k in kills}:
        assert len(kills) < MAX_KILLS, f"seed {seed}: no kill landed {missing}: {kills_seen(kills)}"
        aim = rng.choice(sorted(missing)) if kills else "anywhere"
        kills.append(kill_at_random(stack, fleet, rng, aim, top_up))
        if not wanted - {k.landed for k in kills}:
            fence(stack, kills)  # the final reading, which the loop goes on with if it differs
    settle(stack, jobs, "the kills")

    lap("kills")

    # 3. The hub dies and comes back with the same command; 4. the worker too.
    restart(stack, "hub")
    stack.wait_until("the hub to come back", lambda: hub_answers(stack), timeout=30)
    restart(stack, "worker")
    settle(stack, jobs, "the restarts")

    lap("restarts")

    # 5. PostgreSQL stops (fast shutdown: every client cut) while attempts run, stays down
    # past their leases while the agents go on running and reporting, and starts again.
    jobs.append(submit(session, stack.url, slices=6, sleep=2, marker=marker))
    busy(stack, jobs)
    errors_before = server_errors_met(fleet)
    connection.close()
    pg.stop("fast")
    down_until = time.monotonic() + OUTAGE_S
    stack.wait_until("the hub to report the database down", lambda: hub_health(stack) == 503)
    time.sleep(max(0.0, down_until - time.monotonic()))
    pg.start()
    stack.wait_until("the hub to reconnect by itself", lambda: hub_answers(stack), timeout=30)
    assert server_errors_met(fleet) > errors_before, "no agent met the outage"
    settle(stack, jobs, "the outage")

    lap("outage")

    # 6. An agent is cut off longer than its lease, then comes back to a task run elsewhere.
    jobs.append(submit(session, stack.url, slices=6, sleep=3, marker=marker))
    frozen = stack.wait_until(
        "agent-c to run a task of the new job",
        lambda: running_attempt(c, job=jobs[-1]),
        timeout=60,
    )
    frozen_task = Attempt.objects.get(pk=frozen).task_id
    stack.procs["agent-c"].send_signal(signal.SIGSTOP)
    try:
        stack.wait_until(
            "the frozen agent's task to be run again elsewhere",
            lambda: Attempt.objects.filter(
                task_id=frozen_task, id__gt=frozen, state="succeeded"
            ).exists(),
            timeout=90,
        )
    finally:
        stack.procs["agent-c"].send_signal(signal.SIGCONT)
    stack.wait_until(
        "the thawed agent to be refused and let go of its attempt",
        lambda: f"attempt {frozen}: the hub says the lease is stale" in fleet.log("agent-c"),
        timeout=60,
    )
    lap("frozen agent")

    # 7. PostgreSQL crashes (immediate shutdown, recovery from the WAL on start) while attempts
    # run, and the reaper, the sealer and the agents' heartbeats go on.
    jobs.append(submit(session, stack.url, slices=3, sleep=2, marker=marker))
    running_at_crash = busy(stack, jobs)
    connection.close()
    pg.restart("immediate")
    stack.wait_until("the hub to reconnect after the crash", lambda: hub_answers(stack), timeout=30)

    def finished() -> bool:
        states = set(Job.objects.filter(pk__in=jobs).values_list("state", flat=True))
        return states <= {"succeeded", "failed"}

    wait_for_tasks(stack, jobs, "every job to finish", finished, timeout=180)

    lap("crash, end of the jobs")

    # Every task ended exactly once.
    tasks = Task.objects.filter(job_id__in=jobs)
    slices = Job.objects.filter(pk__in=jobs).aggregate(n=Sum("slices"))["n"]
    assert tasks.count() == slices
    for task in tasks:
        attempts = list(Attempt.objects.filter(task=task).order_by("number"))
        won = [x for x in attempts if x.state == "succeeded"]
        if task.state == "succeeded":
            assert len(won) == 1, (task, attempts)
        else:
            assert task.state == "failed" and not won and len(attempts) == task.max_attempts
        successes = Event.objects.filter(type="AttemptSucceeded", payload__task_id=task.pk)
        assert successes.count() == len(won)
    assert not Attempt.objects.filter(task__job_id__in=jobs, state__in=ACTIVE).exists()

    # The killed agents' interrupted attempts and the frozen one's were not the ones that
    # counted, and paid nothing; where each kill landed still reads as it did.
    for kill in kills:
        assert landed(kill.attempt) == kill.landed, (seed, str(kill))
    interrupted = [k.attempt for k in kills if k.landed != "after completion"]
    for attempt_id in (*interrupted, frozen):
        attempt = Attempt.objects.get(pk=attempt_id)
        assert attempt.state in ("lost", "failed"), attempt
        settled = Event.objects.get(type="AttemptSettled", payload__attempt_id=attempt_id)
        assert settled.payload["charged_minor"] == 0
    assert not Attempt.objects.filter(task_id=frozen_task, node_id=c, state="succeeded").exists()

    # Every attempt settled exactly once; every hold released; the books add up.
    attempt_ids = set(Attempt.objects.filter(task__job_id__in=jobs).values_list("id", flat=True))
    settled = list(
        Event.objects.filter(type="AttemptSettled").values_list(
            "payload__attempt_id", "payload__charged_minor"
        )
    )
    assert sorted(a for a, _ in settled) == sorted(attempt_ids)
    assert not Account.objects.filter(kind="held").exclude(balance=0).exists()
    available = Account.objects.get(code=available_code(submitter.pk)).balance
    assert GRANT - available == sum(charged for _, charged in settled)

    # The restarted hub, worker and beat are still up: beat seals, the ledger verifies.
    stack.wait_until(
        "beat to seal every event",
        lambda: EventSeal.objects.count() >= Event.objects.count() - 2,
        timeout=60,
    )
    lap("checks, seal")
    verified = stack.run(["manage.py", "verify_ledger"])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    down = [name for name in ("hub", "worker", "beat") if stack.procs[name].poll() is not None]
    assert not down, f"{down} died on the way"
    gaps = sorted(
        (later - earlier).total_seconds()
        for attempt_id in Attempt.objects.filter(
            task__job_id__in=jobs, state="succeeded"
        ).values_list("id", flat=True)
        for earlier, later in pairwise(
            Artifact.objects.filter(attempt_id=attempt_id)
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
    )
    with capsys.disabled():
        states = sorted(
            Attempt.objects.filter(task__job_id__in=jobs).values_list("state", flat=True)
        )
        print(
            f"\n  chaos proof ({' '.join(fleet.sandbox)}, seed {seed}): {len(attempt_ids)} "
            f"attempts for {slices} tasks, {dict((s, states.count(s)) for s in set(states))}, "
            f"{running_at_crash} running at the crash, outputs {gaps[len(gaps) // 2]:.2f} s "
            f"apart (median); "
            f"kills: {kills_seen(kills)}; seconds: private cluster {pg.setup_s:.0f}, "
            f"{', '.join(laps)}"
        )
