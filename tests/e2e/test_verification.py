"""Verification end to end, with real agents in their real sandboxes on a live hub, worker and
beat: an honest pair agrees and both are paid, a cheating agent (random bytes, exit 0) is not
paid, loses reliability and is quarantined after repeated disagreement; a new node's first
results are spot-checked by a trusted node of another operator, and then it is trusted."""

import json
import threading
from pathlib import Path

import pytest

from agent.client import HubClient
from jobs.models import Attempt, Job
from ledger.funding import credits_grant
from ledger.models import Event
from nodes.models import Node
from nodes.trust import node_trusted
from people.services import api_key_create, user_create
from tests.e2e.test_job_run import sandbox_args

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SCRIPT = """\
echo "$CP_SLICE_INDEX squared is $((CP_SLICE_INDEX * CP_SLICE_INDEX))" > "$COMPUTEPOOL_OUT/sq.txt"
"""


@pytest.fixture
def live_stack_env() -> dict[str, str]:
    """Trust earned as in production, after two agreeing results; every result of an untrusted
    node spot-checked. The replicated jobs of the first test need no trust: replicas are
    verified work, which untrusted nodes may take."""
    return {
        "JOB_TRUST_AFTER_VERIFIED": "2",
        "JOB_SPOTCHECK_MAX_PCT": "100",
        "JOB_SPOTCHECK_MIN_PCT": "0",
    }


class Pool:
    """Operators, their registered agents and a funded submitter on a live stack."""

    def __init__(self, stack, tmp_path: Path) -> None:
        self.stack, self.tmp = stack, tmp_path
        submitter = user_create(username="e2e-sub", roles=["submitter"])
        _, self.sub_key = api_key_create(user=submitter, role="submitter", name="e2e")
        credits_grant(
            user_id=submitter.pk,
            amount=10_000_000,
            actor="test",
            reference="e2e",
            idempotency_key="e2e-grant",
        )

    def register(self, name: str) -> tuple[list[str], Node]:
        """A new operator and its machine, registered with the agent's CLI: (agent argv, node)."""
        operator = user_create(username=f"op-{name}", roles=["operator"])
        _, key = api_key_create(user=operator, role="operator", name="e2e")
        config = self.tmp / f"{name}.json"
        agent = ["-m", "agent", "--config", str(config)]
        done = self.stack.run(
            [*agent, "register", "--hub", self.stack.url, "--token", key, "--name", name,
             "--region", "IN"]
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        config.write_text(
            json.dumps(
                json.loads(config.read_text())
                | {"work_dir": str(self.tmp / f"work-{name}"), "allowed_images": ["computepool/*"]}
            )
        )
        return agent, Node.objects.get(name=name)

    def start(self, name: str, agent: list[str], *, module: str = "agent") -> None:
        argv = ["-m", module, *agent[2:]]
        self.stack.spawn(name, [*argv, "run", *sandbox_args()])

    def submit(self, **body) -> int:
        import requests

        reply = requests.post(
            f"{self.stack.url}/api/v1/jobs/",
            json={"kind": "script", "script": SCRIPT, "timeout_s": 60, "price_ceiling": 500} | body,
            headers={"Authorization": f"Bearer {self.sub_key}"},
            timeout=10,
        )
        assert reply.status_code == 201, reply.text
        return reply.json()["id"]

    def finished(self, job_ids: list[int]) -> bool:
        states = Job.objects.filter(pk__in=job_ids).values_list("state", flat=True)
        return all(s in ("succeeded", "failed", "cancelled") for s in states)


def test_an_honest_pair_agrees_and_is_paid_and_a_cheater_is_rejected_then_quarantined(
    live_stack, tmp_path
):
    pool = Pool(live_stack, tmp_path)
    agents = {name: pool.register(name) for name in ("ada", "ben", "cheat")}
    pool.start("ada", agents["ada"][0])
    pool.start("ben", agents["ben"][0])
    pool.start("cheat", agents["cheat"][0], module="tests.e2e.cheating_agent")

    jobs = [
        pool.submit(name=f"squares-{i}", slices=1, verification={"replicas": 3, "quorum": 2})
        for i in range(3)
    ]
    live_stack.wait_until("the verified jobs to end", lambda: pool.finished(jobs), timeout=180)

    assert set(Job.objects.filter(pk__in=jobs).values_list("state", flat=True)) == {"succeeded"}
    verdicts = [e.payload for e in Event.objects.filter(type="SliceVerified").order_by("id")]
    assert len(verdicts) == 3 and {v["outcome"] for v in verdicts} == {"agreed"}
    for name in ("ada", "ben"):
        node = Node.objects.get(pk=agents[name][1].pk)
        attempts = Attempt.objects.filter(node=node, task__job__in=jobs)
        assert {a.verdict for a in attempts} == {"agreed"} and attempts.count() == 3
        for attempt in attempts:
            paid = Event.objects.get(stream=f"settle:attempt:{attempt.pk}").payload
            assert paid["charged_minor"] > 0
        assert node.verified_results == 3
    cheat = Node.objects.get(pk=agents["cheat"][1].pk)
    attempts = Attempt.objects.filter(node=cheat, task__job__in=jobs)
    assert {a.verdict for a in attempts} == {"rejected"} and attempts.count() == 3
    for attempt in attempts:
        assert (
            Event.objects.get(stream=f"settle:attempt:{attempt.pk}").payload["charged_minor"] == 0
        )
    assert cheat.reliability < 0.5
    assert (cheat.state, cheat.quarantine_rule) == ("quarantined", "results_rejected")
    verified = live_stack.run(["manage.py", "verify_ledger", "--no-chain"])
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_new_nodes_first_results_are_spot_checked_and_then_it_is_trusted(
    live_stack, tmp_path, settings
):
    settings.JOB_TRUST_AFTER_VERIFIED = 2  # this process's view of trust, as the stack's
    pool = Pool(live_stack, tmp_path)
    checker_argv, checker = pool.register("old-hand")
    newcomer_argv, newcomer = pool.register("newcomer")
    # The checker earned its trust long ago. Until its agent starts it only answers
    # heartbeats (this thread), so the newcomer's results are the only ones to check.
    Node.objects.filter(pk=checker.pk).update(verified_results=20, reliability=0.99)
    key = json.loads((tmp_path / "old-hand.json").read_text())["agent_key"]
    stop = threading.Event()

    def beat() -> None:
        client = HubClient(live_stack.url, key)
        try:
            while not stop.is_set():
                client.heartbeat(status="available", load={}, gpus=[], leases=[])
                stop.wait(0.5)
        finally:
            client.close()

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    try:
        pool.start("newcomer", newcomer_argv)
        job = pool.submit(name="first-work", slices=2)
        live_stack.wait_until(
            "both spot-checks to be queued",
            lambda: Event.objects.filter(type="ReplicaAdded").count() == 2,
            timeout=120,
        )
    finally:
        stop.set()
        beating.join(5)
    assert not node_trusted(Node.objects.get(pk=newcomer.pk))
    assert Job.objects.get(pk=job).state == "running"  # its results wait for the checks
    pool.start("old-hand", checker_argv)
    live_stack.wait_until("the job to end", lambda: pool.finished([job]), timeout=120)

    assert Job.objects.get(pk=job).state == "succeeded"
    checks = Attempt.objects.filter(node=checker, task__job_id=job)
    assert {a.task.trusted_only for a in checks} == {True} and checks.count() == 2
    for attempt in checks:
        assert Event.objects.get(stream=f"settle:attempt:{attempt.pk}").type == "SpotCheckSettled"
    for attempt in Attempt.objects.filter(node=newcomer, task__job_id=job):
        assert attempt.verdict == "agreed"
        paid = Event.objects.get(stream=f"settle:attempt:{attempt.pk}")
        assert paid.type == "AttemptSettled" and paid.payload["charged_minor"] > 0
    newcomer.refresh_from_db()
    assert newcomer.verified_results == 2 and node_trusted(newcomer)
    verified = live_stack.run(["manage.py", "verify_ledger", "--no-chain"])
    assert verified.returncode == 0, verified.stdout + verified.stderr
