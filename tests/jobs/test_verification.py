"""Verified results (jobs.verification) and earned trust (nodes.trust), through the agent API:
replicas on distinct operators, agreement paid, disagreement rejected and quarantined, no
quorum failing the job, spot-checks of new nodes paid by the platform, trust earned."""

import hashlib
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import F

from jobs.models import Attempt, Job, Task, Verification
from jobs.verification import forget_checkers
from ledger.accounts import VERIFICATION, available_code, job_held_code
from ledger.models import Account, Event, Posting
from ledger.verify import verify_ledger
from nodes.models import Node
from nodes.trust import node_trusted
from tests.conftest import _user
from tests.jobs.conftest import claim, complete, job_body, online_node

pytestmark = pytest.mark.django_db

RIGHT, WRONG = b"the right answer\n", b"\x8f random bytes \x13\n"
RAN_FOR = timedelta(seconds=2)


def operator(name: str):
    return _user(name, ["operator"])


def finish(agent, lease: dict, content: bytes, name: str = "out.txt"):
    """The agent's report of a success with one output file: upload, then complete."""
    sha = hashlib.sha256(content).hexdigest()
    uploaded = agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/artifacts",
        {
            "lease_token": lease["lease_token"],
            "name": name,
            "sha256": sha,
            "file": SimpleUploadedFile(name, content),
        },
        format="multipart",
    )
    assert uploaded.status_code == 201, uploaded.json()
    done = complete(agent, lease, artifacts=[{"name": name, "sha256": sha}])
    assert done.status_code == 200, done.json()
    return done


def take(agent) -> dict:
    """A lease, started two seconds ago: the runtime the hub measures (and pays for) is then
    never a few milliseconds, whose cost the fee split can round to nothing for the operator."""
    reply = claim(agent)
    assert reply.status_code == 200, (reply.status_code, reply.content)
    lease = reply.json()
    Attempt.objects.filter(pk=lease["attempt_id"]).update(leased_at=F("leased_at") - RAN_FOR)
    return lease


def settled(attempt_id: int) -> Event:
    return Event.objects.get(stream=f"settle:attempt:{attempt_id}")


def verified_job(submitter, **fields):
    body = job_body(**({"verification": {"replicas": 2, "quorum": 2}} | fields))
    created = submitter.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.json()
    return created.json()


def test_each_slice_runs_on_distinct_operators_and_an_agreeing_pair_is_both_paid(
    submitter, alice, bob, django_capture_on_commit_callbacks
):
    job = verified_job(submitter, slices=1)
    assert job["verification"] == {"replicas": 2, "quorum": 2}
    assert job["max_cost"] == 500 * 60 * 1 * 2  # ceiling × timeout × slices × replicas
    first, first_agent = online_node(bob, name="bob-1")
    _, second_agent = online_node(bob, name="bob-2")
    olga_node, olga_agent = online_node(operator("olga"), name="olga-1")

    lease_a = take(first_agent)
    # bob has a replica of this slice: his other machine gets none of it.
    assert claim(second_agent).status_code == 204
    lease_b = take(olga_agent)
    with django_capture_on_commit_callbacks(execute=True):
        finish(first_agent, lease_a, RIGHT)
        assert Job.objects.get().state == "running"  # one result is not a verdict
        assert Attempt.objects.get(pk=lease_a["attempt_id"]).verdict == "pending"
        assert not Event.objects.filter(stream=f"settle:attempt:{lease_a['attempt_id']}").exists()
        finish(olga_agent, lease_b, RIGHT)

    assert Job.objects.get().state == "succeeded"
    for lease in (lease_a, lease_b):
        assert Attempt.objects.get(pk=lease["attempt_id"]).verdict == "agreed"
        assert settled(lease["attempt_id"]).payload["charged_minor"] > 0
    verdict = Event.objects.get(type="SliceVerified").payload
    assert verdict["outcome"] == "agreed"
    assert sorted(verdict["agreed"]) == sorted([lease_a["attempt_id"], lease_b["attempt_id"]])
    assert verdict["result"]["artifacts"][0]["sha256"] == hashlib.sha256(RIGHT).hexdigest()
    first.refresh_from_db()
    olga_node.refresh_from_db()
    assert (first.verified_results, olga_node.verified_results) == (1, 1)
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_node_returning_other_bytes_is_not_paid_and_a_third_operator_breaks_the_tie(
    submitter, bob, django_capture_on_commit_callbacks
):
    verified_job(submitter)
    _, honest = online_node(bob, name="bob-1")
    cheat_node, cheat = online_node(operator("mallet"), name="mallet-1")
    _, third = online_node(operator("olga"), name="olga-1")
    lease_a, lease_b = take(honest), take(cheat)
    with django_capture_on_commit_callbacks(execute=True):
        finish(honest, lease_a, RIGHT)
        finish(cheat, lease_b, WRONG)  # exit 0, other bytes
    # One against one: no quorum yet, and a third replica is queued for a third operator.
    added = Event.objects.get(type="ReplicaAdded").payload
    assert (added["replica"], added["reason"]) == (3, "requested")
    assert claim(honest).status_code == 204 and claim(cheat).status_code == 204
    lease_c = take(third)
    reliability_before = Node.objects.get(pk=cheat_node.pk).reliability
    with django_capture_on_commit_callbacks(execute=True):
        finish(third, lease_c, RIGHT)

    job = Job.objects.get()
    assert job.state == "succeeded" and job.tasks_succeeded == 3
    assert Attempt.objects.get(pk=lease_b["attempt_id"]).verdict == "rejected"
    assert settled(lease_b["attempt_id"]).payload["charged_minor"] == 0
    for lease in (lease_a, lease_c):
        assert settled(lease["attempt_id"]).payload["charged_minor"] > 0
    cheat_node.refresh_from_db()
    assert cheat_node.reliability < reliability_before
    assert cheat_node.verified_results == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_three_rejected_results_quarantine_the_node(
    submitter, bob, django_capture_on_commit_callbacks
):
    honest_ops = [online_node(operator(f"honest-{i}"), name=f"h-{i}")[1] for i in range(2)]
    cheat_node, cheat = online_node(operator("mallet"), name="mallet-1")
    for round_ in range(3):
        verified_job(submitter, verification={"replicas": 3, "quorum": 2})
        leases = [take(agent) for agent in honest_ops]
        bad = take(cheat)
        with django_capture_on_commit_callbacks(execute=True):
            for agent, lease in zip(honest_ops, leases, strict=True):
                finish(agent, lease, RIGHT)
            finish(cheat, bad, WRONG + bytes([round_]))
        assert Attempt.objects.get(pk=bad["attempt_id"]).verdict == "rejected"
    cheat_node.refresh_from_db()
    assert (cheat_node.state, cheat_node.quarantine_rule) == ("quarantined", "results_rejected")
    assert "3 results disagreed" in cheat_node.quarantine_reason
    assert Event.objects.filter(stream=cheat_node.stream, type="NodeQuarantined").exists()
    assert Job.objects.filter(state="succeeded").count() == 3


def test_results_that_cannot_reach_quorum_fail_the_job_and_release_its_hold(
    submitter, alice, bob, django_capture_on_commit_callbacks
):
    before = Account.objects.get(code=available_code(alice.pk)).balance
    job = verified_job(submitter, max_attempts=1)  # no replica beyond the two asked for
    _, a = online_node(bob, name="bob-1")
    _, b = online_node(operator("olga"), name="olga-1")
    lease_a, lease_b = take(a), take(b)
    with django_capture_on_commit_callbacks(execute=True):
        finish(a, lease_a, RIGHT)
        finish(b, lease_b, WRONG)

    finished = Job.objects.get(pk=job["id"])
    assert finished.state == "failed" and finished.tasks_failed == 2
    verdict = Event.objects.get(type="SliceVerified").payload
    assert verdict["outcome"] == "no_quorum"
    assert "no result reached a quorum of 2" in verdict["detail"]
    assert Verification.objects.get().state == "no_quorum"
    for lease in (lease_a, lease_b):
        assert Attempt.objects.get(pk=lease["attempt_id"]).verdict == "undecided"
        assert settled(lease["attempt_id"]).payload["charged_minor"] == 0
    # Nothing was paid and the hold went back whole.
    assert Account.objects.get(code=job_held_code(job["id"])).balance == 0
    assert Account.objects.get(code=available_code(alice.pk)).balance == before
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


@pytest.mark.parametrize(
    ("verification", "field"),
    [
        ({"replicas": 1, "quorum": 1}, "replicas"),
        ({"replicas": 2, "quorum": 3}, "quorum"),
        ({"replicas": 99, "quorum": 2}, "replicas"),
        ({"replicas": 3}, "quorum"),
    ],
)
def test_a_verification_the_hub_cannot_honour_is_a_400(submitter, verification, field):
    reply = submitter.post("/api/v1/jobs/", job_body(verification=verification), format="json")
    assert reply.status_code == 400
    assert field in str(reply.json())
    assert not Job.objects.exists()


# --- earned trust and spot-checks -------------------------------------------------------------


@pytest.fixture
def trusted_checker(earned_trust):
    """A node of another operator that earned its trust long ago."""
    node, agent = online_node(operator("olga"), name="olga-1")
    Node.objects.filter(pk=node.pk).update(verified_results=50, reliability=0.95)
    forget_checkers()
    return node, agent


def test_a_new_node_starts_untrusted_and_takes_only_low_risk_or_verified_work(
    submitter, bob, earned_trust
):
    node, agent = online_node(bob)
    assert not node_trusted(node)
    submitter.post("/api/v1/jobs/", job_body(priority=5), format="json")
    assert claim(agent).status_code == 204  # high priority: not for an untrusted node
    verified_job(submitter, priority=5)
    assert Task.objects.get(pk=take(agent)["spec"]["task_id"]).replica == 1  # verified work: it may


def test_a_new_nodes_results_are_spot_checked_until_it_has_earned_trust(
    submitter, alice, bob, trusted_checker, django_capture_on_commit_callbacks
):
    _, checker = trusted_checker
    node, agent = online_node(bob)
    _, stranger = online_node(operator("ned"), name="ned-1")  # untrusted, another operator
    for _ in range(3):
        assert not node_trusted(Node.objects.get(pk=node.pk))
        job = submitter.post("/api/v1/jobs/", job_body(), format="json").json()
        lease = take(agent)
        with django_capture_on_commit_callbacks(execute=True):
            finish(agent, lease, RIGHT)
        check = Event.objects.filter(type="ReplicaAdded").order_by("-id").first().payload
        assert (check["job_id"], check["reason"]) == (job["id"], "spot_check")
        assert Task.objects.get(pk=check["task_id"]).trusted_only
        # Neither the node itself nor another untrusted node may check it.
        assert claim(agent).status_code == 204 and claim(stranger).status_code == 204
        check_lease = take(checker)
        with django_capture_on_commit_callbacks(execute=True):
            finish(checker, check_lease, RIGHT)
        assert Job.objects.get(pk=job["id"]).state == "succeeded"
        # The submitter pays for its one slice, the node's; the platform pays the check.
        assert settled(lease["attempt_id"]).type == "AttemptSettled"
        assert settled(lease["attempt_id"]).payload["charged_minor"] > 0
        paid = settled(check_lease["attempt_id"])
        assert paid.type == "SpotCheckSettled" and paid.payload["operator_minor"] > 0
    node.refresh_from_db()
    assert node.verified_results == 3 and node_trusted(node)
    spent = sum(Posting.objects.filter(account__code=VERIFICATION).values_list("amount", flat=True))
    assert spent < 0  # the platform's checks, in its books
    # Trusted now: high-priority work is its to take.
    submitter.post("/api/v1/jobs/", job_body(priority=5), format="json")
    assert take(agent)["spec"]["task_id"]
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_spot_check_that_disagrees_rejects_the_new_node_and_the_submitter_pays_a_checker(
    submitter, bob, trusted_checker, django_capture_on_commit_callbacks
):
    _, checker = trusted_checker
    second_node, second = online_node(operator("tess"), name="tess-1")
    Node.objects.filter(pk=second_node.pk).update(verified_results=50, reliability=0.95)
    forget_checkers()
    node, agent = online_node(bob)
    job = submitter.post("/api/v1/jobs/", job_body(), format="json").json()
    lease = take(agent)
    with django_capture_on_commit_callbacks(execute=True):
        finish(agent, lease, WRONG)
    first_check = take(checker)
    with django_capture_on_commit_callbacks(execute=True):
        finish(checker, first_check, RIGHT)
    # One against one: a second trusted node of a third operator breaks the tie.
    second_check = take(second)
    with django_capture_on_commit_callbacks(execute=True):
        finish(second, second_check, RIGHT)

    assert Job.objects.get(pk=job["id"]).state == "succeeded"
    assert Attempt.objects.get(pk=lease["attempt_id"]).verdict == "rejected"
    assert settled(lease["attempt_id"]).payload["charged_minor"] == 0
    # The submitter pays one result, the first agreeing checker's; the platform the other.
    assert settled(first_check["attempt_id"]).type == "AttemptSettled"
    assert settled(first_check["attempt_id"]).payload["charged_minor"] > 0
    assert settled(second_check["attempt_id"]).type == "SpotCheckSettled"
    node.refresh_from_db()
    assert node.reliability < 0.5 and node.verified_results == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_with_no_trusted_node_of_another_operator_nothing_is_checked(
    submitter, bob, earned_trust, django_capture_on_commit_callbacks
):
    _, agent = online_node(bob)
    submitter.post("/api/v1/jobs/", job_body(), format="json")
    lease = take(agent)
    with django_capture_on_commit_callbacks(execute=True):
        finish(agent, lease, RIGHT)
    assert Job.objects.get().state == "succeeded"
    assert not Event.objects.filter(type="ReplicaAdded").exists()
    assert settled(lease["attempt_id"]).payload["charged_minor"] > 0


def test_an_admin_vouches_for_a_pools_first_node_and_the_vouch_is_recorded(
    submitter, bob, dave, earned_trust, client
):
    node, agent = online_node(bob)
    submitter.post("/api/v1/jobs/", job_body(priority=5), format="json")
    assert claim(agent).status_code == 204  # untrusted, and nobody can check it
    client.force_login(dave)
    changelist = "/admin/nodes/node/"
    reply = client.post(changelist, {"action": "vouch", "_selected_action": [node.pk]})
    assert reply.status_code == 302
    node.refresh_from_db()
    assert node.verified_results == 3 and node_trusted(node)
    vouched = Event.objects.get(stream=node.stream, type="NodeVouched").payload
    assert vouched["previous"] == 0 and "dave" in vouched["reason"]
    assert take(agent)["attempt_id"]
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_verified_job_cancelled_with_a_result_pending_ends_cancelled_and_pays_that_result(
    submitter, alice, bob, django_capture_on_commit_callbacks
):
    job = verified_job(submitter)
    _, agent = online_node(bob)
    lease = take(agent)
    with django_capture_on_commit_callbacks(execute=True):
        finish(agent, lease, RIGHT)
        assert Attempt.objects.get(pk=lease["attempt_id"]).verdict == "pending"
        # The other replica never ran: the cancel ends it, and the slice concludes after it.
        reply = submitter.post(f"/api/v1/jobs/{job['id']}/cancel", format="json")
        assert reply.status_code == 200, reply.json()

    assert Job.objects.get(pk=job["id"]).state == "cancelled"
    assert Verification.objects.get().state == "cancelled"
    assert Attempt.objects.get(pk=lease["attempt_id"]).verdict == "undecided"
    # Work done before the cancel is paid, unverified; the rest of the hold went back.
    assert settled(lease["attempt_id"]).payload["charged_minor"] > 0
    assert Account.objects.get(code=job_held_code(job["id"])).balance == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
