"""Random sequences of the whole economy through the real services: top-up, submit, claim,
complete, fail, cancel, lose a lease, cashout request/approve/reject/pay. After every step the
invariants hold; at the end a replay of the log equals the live tables."""

import contextlib
from datetime import timedelta

from django.db.models import Sum
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from core.errors import DomainError
from jobs.attempts import attempt_complete, attempt_fail
from jobs.cancellation import job_cancel
from jobs.claim import task_claim
from jobs.errors import JobNotCancellable
from jobs.leases import leases_reap
from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, Job, JobState
from jobs.node_profile import profile_for
from jobs.serializers import JobIn
from jobs.submission import job_submit
from ledger import cashouts
from ledger.economy_projection import economy_invariants
from ledger.errors import InsufficientFunds
from ledger.funding import credits_grant
from ledger.models import Account, Event, Posting
from ledger.verify import verify_ledger
from nodes.models import Node
from nodes.services import node_heartbeat
from people.services import user_create
from tests.conftest import reseed
from tests.nodes.conftest import register_node

TIMEOUT_S = 600_000  # long enough that earnings pass the minimum cashout (₹500)

TOPUP = st.tuples(st.just("topup"), st.integers(1, 10**9))
SUBMIT = st.tuples(st.just("submit"), st.integers(1, 3))
CLAIM = st.tuples(st.just("claim"), st.integers(0, 1))
COMPLETE = st.tuples(st.just("complete"), st.integers(0, 5), st.integers(0, TIMEOUT_S + 100))
FAIL = st.tuples(
    st.just("fail"),
    st.integers(0, 5),
    st.sampled_from(["job", "infra", "timeout"]),
    st.integers(0, TIMEOUT_S),
)
LOSE = st.tuples(st.just("lose"), st.integers(0, 5))
CANCEL = st.tuples(st.just("cancel"), st.integers(0, 5))
CASHOUT = st.tuples(st.just("cashout"), st.integers(30, 100))
APPROVE = st.tuples(st.just("approve"), st.integers(0, 5))
REJECT = st.tuples(st.just("reject"), st.integers(0, 5))
PAY = st.tuples(st.just("pay"), st.integers(0, 5))
# Request, approve and pay in one step, so examples reach money leaving the books.
PAYDAY = st.tuples(st.just("payday"), st.integers(30, 100))
# Weighted towards the steps that reach money: a settlement needs a submit and a claim first, a
# payout needs earnings, a request and an approval.
step = st.one_of(
    TOPUP,
    SUBMIT,
    SUBMIT,
    CLAIM,
    CLAIM,
    CLAIM,
    COMPLETE,
    COMPLETE,
    COMPLETE,
    FAIL,
    LOSE,
    CANCEL,
    CASHOUT,
    APPROVE,
    REJECT,
    PAY,
    PAYDAY,
    PAYDAY,
)


def pick(items: list, k: int):
    return items[k % len(items)] if items else None


class TestEconomyThroughJobs(TestCase):
    def setUp(self) -> None:
        reseed()
        self.sub = user_create(username="sub", roles=["submitter"])
        self.op = user_create(username="op", roles=["operator"])
        self.nodes = []
        for i in range(2):
            node, _ = register_node(self.op, name=f"rig-{i}")
            node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[])
            self.nodes.append(node)
        self.keys = 0

    def key(self) -> str:
        self.keys += 1
        return f"k{self.keys}"

    def run_step(self, op: tuple) -> None:
        name, *args = op
        active = list(Attempt.objects.filter(state__in=ACTIVE_ATTEMPT_STATES).order_by("id"))
        if name == "topup":
            credits_grant(
                user_id=self.sub.pk,
                amount=args[0],
                actor="t",
                reference="t",
                idempotency_key=self.key(),
            )
        elif name == "submit":
            data = JobIn(
                data={
                    "kind": "script",
                    "script": "true",
                    "slices": args[0],
                    "timeout_s": TIMEOUT_S,
                    "price_ceiling": 500,
                    "max_attempts": 2,
                }
            )
            data.is_valid(raise_exception=True)
            with contextlib.suppress(InsufficientFunds):
                job_submit(submitter_id=self.sub.pk, data=data.validated_data)
        elif name == "claim":
            task_claim(profile=profile_for(Node.objects.get(pk=self.nodes[args[0]].pk)))
        elif name in ("complete", "fail") and (attempt := pick(active, args[0])):
            # The hub measures runtime from the lease's start: move the start back.
            elapsed = args[-1]
            Attempt.objects.filter(pk=attempt.pk).update(
                leased_at=timezone.now() - timedelta(seconds=elapsed)
            )
            if name == "complete":
                attempt_complete(
                    attempt_id=attempt.pk,
                    token=attempt.lease_token,
                    node_id=attempt.node_id,
                    exit_code=0,
                )
            else:
                attempt_fail(
                    attempt_id=attempt.pk,
                    token=attempt.lease_token,
                    node_id=attempt.node_id,
                    failure_class=args[1],
                )
        elif name == "lose" and (attempt := pick(active, args[0])):
            Attempt.objects.filter(pk=attempt.pk).update(
                lease_expires_at=timezone.now() - timedelta(seconds=1)
            )
            leases_reap()
        elif name == "cancel":
            open_jobs = list(Job.objects.filter(state__in=[JobState.QUEUED, JobState.RUNNING]))
            if job := pick(open_jobs, args[0]):
                with contextlib.suppress(JobNotCancellable):
                    job_cancel(job=job, actor="t")
        elif name == "payday":
            self.run_step(("cashout", args[0]))
            self.run_step(("approve", -1))
            self.run_step(("pay", -1))
        elif name == "cashout":
            earnings = Account.objects.filter(code=f"user:{self.op.pk}:earnings").first()
            if earnings and earnings.balance:
                # Cashouts are whole paise: 1 paisa per credit at the seeded rate = 100 minor.
                amount = max(100, earnings.balance * args[0] // 100 // 100 * 100)
                with contextlib.suppress(DomainError):  # under the minimum (₹500)
                    cashouts.cashout_request(
                        operator_id=self.op.pk,
                        amount=amount,
                        actor="t",
                        payout_details={"method": "upi", "vpa": "op@bank"},
                    )
        elif name in ("approve", "reject", "pay"):
            from ledger.models import Cashout

            wanted = {"approve": "requested", "reject": "requested", "pay": "approved"}[name]
            if cashout := pick(list(Cashout.objects.filter(status=wanted).order_by("id")), args[0]):
                if name == "approve":
                    cashouts.cashout_approve(cashout_id=cashout.pk, actor="finance")
                elif name == "reject":
                    cashouts.cashout_reject(cashout_id=cashout.pk, reason="test", actor="f")
                else:
                    cashouts.cashout_mark_paid(
                        cashout_id=cashout.pk, payout_reference=self.key(), actor="finance"
                    )

    def check(self) -> None:
        assert economy_invariants() == []
        assert (Posting.objects.aggregate(s=Sum("amount"))["s"] or 0) == 0
        assert not Account.objects.filter(allow_negative=False, balance__lt=0).exists()
        settled = Event.objects.filter(type="AttemptSettled").values_list(
            "payload__attempt_id", flat=True
        )
        assert len(settled) == len(set(settled))  # never twice

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(step, min_size=20, max_size=60))
    def test_invariants_hold_after_every_step(self, steps):
        credits_grant(
            user_id=self.sub.pk, amount=10**11, actor="t", reference="t", idempotency_key=self.key()
        )
        for op in steps:
            self.run_step(op)
            self.check()
        report = verify_ledger(check_chain=False)
        assert report.ok, report.problems[:5]
        # What the example reached, in --hypothesis-show-statistics.
        for kind in ("AttemptSettled", "CashoutPaid", "CashoutRejected", "JobFinished"):
            event(f"{kind}: {'yes' if Event.objects.filter(type=kind).exists() else 'no'}")
