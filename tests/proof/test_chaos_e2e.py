"""Chaos on a live stack: real agents running real jobs while their world breaks around them.

Three agent processes run two jobs through a real sandbox, and one thing at a time fails:
an agent is SIGKILLed mid-job, another between its uploads, the hub is killed and started again
with the same command, the Celery worker too, every database connection of the test database is
terminated (a database outage as the hub sees one: PostgreSQL itself is shared with other suites
on this machine, so it is not restarted), and an agent is frozen (SIGSTOP) past its lease and
then thawed. Afterwards every task ended exactly once (succeeded once, or failed after its
attempts ran out), every attempt settled once, the thawed agent was refused (409) and stopped,
and `manage.py verify_ledger` passes. Every wait is bounded.
"""

import contextlib
import json
import shutil
import signal
import tempfile
import uuid
from pathlib import Path

import pytest
import requests
from django.db import connection

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
ACTIVE = ("leased", "running")
# The hub as a deployment runs it (docker-compose.yml): threaded workers, so that idle agents'
# long-polling claims do not occupy every worker and starve heartbeats.
THREADED = ["-k", "gthread", "--threads", "8"]
# Leases reaped within a second of expiring; a requeued task is claimable at once.
JOB_ENV = {"JOB_REAPER_INTERVAL_S": "1", "JOB_RETRY_BACKOFF_S": "0"}


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


def active_attempt(node_id: int, *, state: str = "running", with_artifact: bool = False):
    attempts = Attempt.objects.filter(node_id=node_id, state=state)
    if with_artifact:
        attempts = attempts.filter(artifacts__isnull=False)
    return attempts.order_by("-id").values_list("id", flat=True).first()


def restart(stack, name: str, extra: list[str] | None = None) -> None:
    argv = stack.procs[name].args[1:] + (extra or [])
    stack.kill(name)
    stack.spawn(name, argv)


def hub_answers(stack) -> bool:
    return requests.get(f"{stack.url}/healthz", timeout=2).status_code == 200


def terminate_database_sessions() -> int:
    """Every other connection to the test database, dropped at once: the hub's, the worker's and
    beat's, mid-query or idle, as a failover or a restart would drop them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


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


@pytest.mark.timeout(420)
def test_every_task_ends_exactly_once_through_kills_restarts_and_outages(
    monkeypatch, request, tmp_path: Path, capsys
):
    from tests.e2e import conftest as e2e

    for name, value in JOB_ENV.items():
        monkeypatch.setitem(e2e.FAST, name, value)
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
    a, b, c = (fleet.node_ids[n] for n in ("agent-a", "agent-b", "agent-c"))
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {sub_key}"
    jobs = [submit(session, stack.url, slices=12, sleep=1.5, marker=marker)]

    # 1. An agent dies mid-job: its attempt is lost, the task runs again elsewhere.
    killed_mid_job = stack.wait_until(
        "agent-a to run a task", lambda: active_attempt(a), timeout=60
    )
    stack.kill("agent-a")
    fleet.start("agent-a")

    # 2. An agent dies between uploads: an artifact is in, the completion never comes.
    killed_mid_upload = stack.wait_until(
        "agent-b to upload an output",
        lambda: active_attempt(b, with_artifact=True),
        timeout=60,
        every=0.01,
    )
    stack.kill("agent-b")
    fleet.start("agent-b")

    # 3. The hub dies and comes back with the same command; 4. the worker too.
    restart(stack, "hub")
    stack.wait_until("the hub to come back", lambda: hub_answers(stack), timeout=30)
    restart(stack, "worker")

    # 5. A database outage: every connection of the hub, the worker and beat is cut.
    assert terminate_database_sessions() > 0

    # 6. An agent is cut off longer than its lease, then comes back to a task run elsewhere.
    jobs.append(submit(session, stack.url, slices=6, sleep=3, marker=marker))
    frozen = stack.wait_until("agent-c to run a task", lambda: active_attempt(c), timeout=60)
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
    # A second outage, while everything is busy again.
    assert terminate_database_sessions() > 0

    def finished() -> bool:
        states = set(Job.objects.filter(pk__in=jobs).values_list("state", flat=True))
        return states <= {"succeeded", "failed"}

    stack.wait_until("every job to finish", finished, timeout=180)

    # Every task ended exactly once.
    tasks = Task.objects.filter(job_id__in=jobs)
    assert tasks.count() == 18
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

    # The killed and the frozen attempts were not the ones that counted, and paid nothing.
    for attempt_id in (killed_mid_job, killed_mid_upload, frozen):
        attempt = Attempt.objects.get(pk=attempt_id)
        assert attempt.state in ("lost", "failed"), attempt
        settled = Event.objects.get(type="AttemptSettled", payload__attempt_id=attempt_id)
        assert settled.payload["charged_minor"] == 0
    assert Artifact.objects.filter(attempt_id=killed_mid_upload).exists()
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
    verified = stack.run(["manage.py", "verify_ledger"])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    down = [name for name in ("hub", "worker", "beat") if stack.procs[name].poll() is not None]
    assert not down, f"{down} died on the way"
    with capsys.disabled():
        states = sorted(
            Attempt.objects.filter(task__job_id__in=jobs).values_list("state", flat=True)
        )
        print(
            f"\n  chaos proof ({' '.join(fleet.sandbox)}): {len(attempt_ids)} attempts for 18 "
            f"tasks, {dict((s, states.count(s)) for s in set(states))}"
        )
