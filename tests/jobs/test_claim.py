import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from agent.spec import verify_spec
from jobs.claim import task_claim
from jobs.models import Attempt, Task
from jobs.node_profile import profile_for
from nodes.signing import hub_public_key_b64
from tests.jobs.conftest import claim, gpu, job_body, online_node
from tests.nodes.conftest import BASE

pytestmark = pytest.mark.django_db


def submit(client, **overrides):
    response = client.post("/api/v1/jobs/", job_body(**overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def test_the_spec_is_signed_and_the_agent_verifies_it(submitter, bob):
    submit(submitter)
    _, agent = online_node(bob)
    lease = claim(agent).json()
    verify_spec(lease["spec"], lease["signature"], hub_public_key_b64())
    assert lease["spec"]["attempt_id"] == lease["attempt_id"]
    assert Attempt.objects.get(pk=lease["attempt_id"]).lease_token == lease["lease_token"]


@pytest.mark.parametrize(
    ("requirements", "claimable"),
    [
        ({"min_vram_mb": 20000}, True),
        ({"min_vram_mb": 30000}, False),
        ({"cpu_cores": 64}, False),
        ({"ram_mb": 128000}, False),
        ({"gpu_tiers": ["rtx-3060"]}, False),
        ({"gpu_tiers": ["rtx-4090", "rtx-3060"]}, True),
        ({"min_compute_capability": "9.0"}, False),
        ({"min_compute_capability": "8.9"}, True),
        ({"region": "US"}, False),
        ({"region": "in"}, True),
    ],
)
def test_requirements_are_hard_gates(submitter, bob, requirements, claimable):
    submit(submitter, requirements=requirements)
    _, agent = online_node(bob, region="IN")
    assert claim(agent).status_code == (200 if claimable else 204)


def test_a_price_ceiling_below_the_nodes_price_is_not_matched(submitter, bob):
    submit(submitter, price_ceiling=10)
    _, agent = online_node(bob)
    assert claim(agent).status_code == 204


def test_priority_then_fit_then_age(submitter, bob):
    old_small = submit(submitter, requirements={"min_vram_mb": 0})
    big = submit(submitter, requirements={"min_vram_mb": 16000})
    urgent = submit(submitter, priority=5)
    _, agent = online_node(bob)
    order = [claim(agent).json()["spec"]["job_id"] for _ in range(3)]
    assert order == [urgent, big, old_small]


def test_a_node_that_lost_a_task_is_never_handed_it_again(submitter, bob):
    submit(submitter)
    _, agent = online_node(bob)
    lease = claim(agent).json()
    from tests.jobs.conftest import fail

    assert fail(agent, lease, "infra").json()["status"] == "queued"
    Task.objects.update(available_at=Task.objects.get().created_at)  # skip the backoff
    assert claim(agent).status_code == 204
    _, other = online_node(bob, name="rig-2")
    assert claim(other).status_code == 200


def test_an_offline_or_quarantined_node_claims_nothing(submitter, bob):
    from nodes.models import Node

    submit(submitter)
    node, agent = online_node(bob)
    Node.objects.filter(pk=node.pk).update(state="quarantined")
    assert claim(agent).status_code == 204


def test_a_waiting_claim_is_woken_by_a_submission(submitter, bob, transactional_db, redis_wakeups):
    _, agent = online_node(bob)
    result = {}

    def wait_for_work() -> None:
        started = time.monotonic()
        result["response"] = claim(agent, wait=20)
        result["waited"] = time.monotonic() - started
        connection.close()

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    time.sleep(0.5)
    submit(submitter)
    waiter.join(30)
    assert result["response"].status_code == 200
    # Woken by the submission, not by the 20 s timeout: a margin wide enough for a machine busy
    # with other work (1.5 s failed once beside a full CI run on the same two cores).
    assert result["waited"] < 6


def test_the_better_gpu_wins_a_tie(submitter, bob, transactional_db, redis_wakeups):
    _, big = online_node(bob, name="4090", gpus=[gpu()])
    _, small = online_node(
        bob,
        name="3060",
        gpus=[gpu(name="NVIDIA GeForce RTX 3060", vram_total_mb=12288, compute_capability="8.6")],
    )
    results = {}

    def wait(name, client) -> None:
        results[name] = claim(client, wait=5).status_code
        connection.close()

    threads = [
        threading.Thread(target=wait, args=(n, c)) for n, c in (("4090", big), ("3060", small))
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    submit(submitter, slices=1, price_ceiling=500)
    for thread in threads:
        thread.join(10)
    assert results == {"4090": 200, "3060": 204}


@pytest.mark.postgres
def test_a_claim_writes_its_events_through_the_ledgers_door(submitter, bob):
    from ledger.models import Event

    job_id = submit(submitter, slices=2)
    node, agent = online_node(bob)
    first, second = claim(agent).json(), claim(agent).json()
    task_events = Event.objects.filter(type="TaskClaimed").order_by("id")
    assert [e.payload["attempt_id"] for e in task_events] == [
        first["attempt_id"],
        second["attempt_id"],
    ]
    started = Event.objects.get(type="JobStarted")
    assert (started.stream, started.payload, started.version) == (
        f"job:{job_id}",
        {"job_id": job_id},
        2,
    )
    for event in [*task_events, started]:
        assert event.fingerprint is None  # written under no idempotency key
    attempt = Attempt.objects.get(pk=first["attempt_id"])
    task = Task.objects.get(pk=attempt.task_id)
    claimed = task_events[0]
    assert claimed.stream == f"task:{task.pk}" and claimed.version == task.version == 1
    assert claimed.actor == f"node:{node.pk}"
    assert claimed.payload == {
        "task_id": task.pk,
        "job_id": job_id,
        "index": task.index,
        "attempt_id": attempt.pk,
        "attempt": 1,
        "node_id": node.pk,
        "lease_expires_at": attempt.lease_expires_at.isoformat(),
        "price_per_s": attempt.price_per_s,
    }
    assert (task.state, task.attempts, task.current_attempt_id) == ("leased", 1, attempt.pk)
    assert started.id > claimed.id  # the log reads in the order the claim happened


@pytest.mark.postgres
def test_a_claim_and_its_events_commit_together(submitter, bob):
    # The claim's statement and its events are one transaction: an append the log refuses (the
    # task's stream moved past the version the claim read) leaves no attempt, no leased task
    # and no started job behind.
    from jobs.models import Job
    from ledger.errors import VersionConflict
    from ledger.models import Event
    from tests.ledger.helpers import append

    job_id = submit(submitter, slices=1)
    task = Task.objects.get(job_id=job_id)
    append(f"task:{task.pk}", memo="in the way", expected_version=task.version)
    node, _ = online_node(bob)
    events = Event.objects.count()
    with pytest.raises(VersionConflict):
        task_claim(profile=profile_for(node))
    assert not Attempt.objects.exists()
    assert Task.objects.get(pk=task.pk).state == "queued"
    assert Job.objects.get(pk=job_id).state == "queued"
    assert Event.objects.count() == events


@pytest.mark.postgres
@pytest.mark.parametrize("small", [False, True], ids=["queue-pick", "bucketed-pick"])
def test_the_claim_statement_stays_within_what_psycopg_caches(submitter, bob, monkeypatch, small):
    # Past these limits psycopg parses the statement's placeholders anew on every call (12 % of
    # the hub's samples under load, docs/benchmarks.md §2): a claim that grows a parameter
    # too many must be noticed, not just run slower. Both picks: a big node's (the queue's
    # index) and a small node's (its size classes).
    import psycopg._queries as queries

    submit(submitter)
    caps = {}
    if small:
        caps = {"gpus": [], "cpu": {**BASE["cpu"], "logical_cores": 2}, "ram_mb": 2048}
    _, agent = online_node(bob, **caps)
    seen = []
    convert = queries.PostgresQuery.convert

    def spy(self, query, variables):
        seen.append((query, variables))
        return convert(self, query, variables)

    monkeypatch.setattr(queries.PostgresQuery, "convert", spy)
    assert claim(agent).status_code == 200
    (query, variables), *_ = [(q, v) for q, v in seen if "WITH node AS" in str(q)]
    assert ("size_class" in str(query)) == small
    assert len(query) <= queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(variables) <= queries.MAX_CACHED_STATEMENT_PARAMS


@pytest.mark.postgres
def test_a_claim_whose_event_version_is_taken_writes_nothing_and_says_so(submitter, bob):
    from django.db import transaction

    from jobs.claim import task_claim
    from jobs.node_profile import profile_for
    from ledger.errors import VersionConflict
    from ledger.services import event_append

    submit(submitter)
    node, _ = online_node(bob)
    task = Task.objects.get()
    with transaction.atomic():  # the task's stream moved on without its row: version 1 taken
        event_append(
            stream=f"task:{task.pk}",
            type="TaskStarted",
            actor="test",
            expected_version=0,
            payload={"task_id": task.pk, "job_id": task.job_id, "index": 0, "attempt_id": 1},
        )
    with pytest.raises(VersionConflict), transaction.atomic():
        task_claim(profile=profile_for(node))
    task.refresh_from_db()
    assert (task.state, task.attempts) == ("queued", 0)
    assert not Attempt.objects.exists()


@pytest.mark.postgres
def test_the_claims_attempt_row_is_the_one_the_orm_would_store(submitter, bob):
    # The one-statement claim writes the attempt's defaults as literals of its text: every
    # column it does not set must hold what `save()` stores for a field left unset, and the
    # rest the lease: the node, its price, the task's next number, the lease's start and end.
    from django.utils import timezone

    from jobs.billing import node_price
    from jobs.claim import lease_duration
    from jobs.node_profile import profile_for

    submit(submitter)
    node, agent = online_node(bob)
    lease = claim(agent).json()
    stored = Attempt.objects.get(pk=lease["attempt_id"])
    task = Task.objects.get(pk=stored.task_id)
    expected = Attempt(
        node_id=node.pk,
        task_id=task.pk,
        number=task.attempts,
        leased_at=stored.leased_at,
        lease_expires_at=stored.leased_at + lease_duration(),
        price_per_s=profile_for(node).price_per_s,
        lease_token=stored.lease_token,
    )
    assert stored.lease_expires_at == expected.lease_expires_at > timezone.now()
    for field in Attempt._meta.concrete_fields:
        if not field.primary_key:
            assert getattr(stored, field.attname) == getattr(expected, field.attname), field.name
    price = node_price(node).per_s
    assert (stored.node_id, stored.state, stored.price_per_s) == (node.pk, "leased", price)
    assert (stored.number, stored.lease_token) == (1, lease["lease_token"])


def test_a_waiting_claim_gets_a_requeued_task_when_its_backoff_ends(
    submitter, bob, transactional_db, redis_wakeups, settings
):
    # The reaper's wake-up comes when the task is requeued, before it is claimable; nothing
    # else is published when the backoff ends, so the waiting claim must wake itself then.
    from jobs.leases import leases_reap

    settings.JOB_RETRY_BACKOFF_S = 1
    submit(submitter)
    _, lost = online_node(bob, name="lost")
    _, idle = online_node(bob, name="idle")
    attempt_id = claim(lost).json()["attempt_id"]
    result = {}

    def wait_for_work() -> None:
        result["response"] = claim(idle, wait=8)
        result["at"] = time.time()
        connection.close()

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    time.sleep(0.5)
    Attempt.objects.filter(pk=attempt_id).update(lease_expires_at=timezone.now())
    assert leases_reap() == 1
    due = Task.objects.get().available_at.timestamp()
    waiter.join(15)
    assert result["response"].status_code == 200
    # Claimed as the backoff ended, not when the 8 s wait ran out.
    assert result["at"] - due < 1.0, f"claimed {result['at'] - due:.2f} s after the backoff"


def test_the_next_backoff_end_is_read_once_a_generation_and_again_when_it_passes(submitter):
    # Every waiting claim of a process wakes with the work and, finding none, asks when the
    # next backoff ends: that is read once for the generation, not once for each claim.
    from datetime import timedelta

    from django.test.utils import CaptureQueriesContext

    from jobs.api import _BackoffEnd

    submit(submitter)
    task = Task.objects.get()  # queued, never attempted: no backoff to end
    now = timezone.now()
    ends = _BackoffEnd()
    with CaptureQueriesContext(connection) as reads:
        assert ends.after(now, generation=1) is None
        assert ends.after(now, generation=1) is None
    assert len(reads) == 1
    # A requeue publishes a wake-up, which moves the generation: read again.
    due = now + timedelta(seconds=5)
    Task.objects.filter(pk=task.pk).update(state="queued", attempts=1, available_at=due)
    with CaptureQueriesContext(connection) as reads:
        assert ends.after(now, generation=2) == due
        assert ends.after(now + timedelta(seconds=1), generation=2) == due
    assert len(reads) == 1
    # Once that end has passed, it is read again in the same generation.
    later = due + timedelta(milliseconds=1)
    with CaptureQueriesContext(connection) as reads:
        assert ends.after(later, generation=2) is None
    assert len(reads) == 1


@pytest.mark.parametrize("wait", [-1, 31, 10**400, "NaN", "soon", None, [1]])
def test_it_refuses_a_wait_out_of_range_with_a_field_error_and_leases_nothing(submitter, bob, wait):
    submit(submitter)
    _, agent = online_node(bob)
    response = agent.post("/api/v1/agent/claim", {"wait": wait}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "wait" in response.json()["fields"]
    assert not Attempt.objects.exists()


@pytest.mark.parametrize("body", [[], "wait", 3])
def test_it_refuses_a_claim_body_that_is_not_an_object(bob, body):
    _, agent = online_node(bob)
    response = agent.post("/api/v1/agent/claim", body, format="json")
    assert response.status_code == 400, response.content[:300]


@pytest.mark.parametrize("body", [{}, {"wait": 0}, {"wait": 0.0}, {"wait": "0"}])
def test_it_accepts_a_claim_without_a_wait_or_with_none_to_speak_of(submitter, bob, body):
    submit(submitter)
    _, agent = online_node(bob)
    response = agent.post("/api/v1/agent/claim", body, format="json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["attempt_id"] == Attempt.objects.get().pk
