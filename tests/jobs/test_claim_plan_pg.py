"""The claim is a prepared statement (psycopg prepares it after a few calls): PostgreSQL then
plans it once, without the call's values (its generic plan), and keeps that plan while its
estimated cost is no worse than planning each call. That plan must walk the queue's index in
order and stop at the first task, whatever the queue's size and its statistics: a plan that
sorts the queue costs milliseconds per claim per ten thousand tasks queued."""

import re

import pytest
from django.db import connection

from bench.claim_plan import claim_generic_plan
from jobs.claim import task_claim
from jobs.node_profile import profile_for
from tests.jobs.conftest import CREDITS, fund, online_node, submit_job
from tests.nodes.conftest import BASE

pytestmark = pytest.mark.postgres


def _queue(user, jobs: int) -> None:
    fund(user, 100_000_000 * CREDITS)
    for i in range(jobs):
        cores = 1 + i % 4
        submit_job(user.pk, 20, requirements={"cpu_cores": cores, "ram_mb": 512 * cores})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_task")


def test_the_claims_generic_plan_walks_the_queue_in_order(alice, bob):
    _queue(alice, 40)
    node, _ = online_node(bob)
    plan = claim_generic_plan(profile_for(node))
    assert "task_claim_queue" in plan, plan
    # The gates' default estimates, multiplied, once made it "one row" to sort: it sorted the
    # whole queue on every claim.
    assert "Sort" not in plan, plan
    assert "Bitmap" not in plan, plan


def test_a_small_nodes_generic_plan_reads_its_classes_in_order(alice, bob):
    _queue(alice, 40)
    cpu = {**BASE["cpu"], "physical_cores": 2, "logical_cores": 2}
    node, _ = online_node(bob, name="small", gpus=[], cpu=cpu, ram_mb=2048)
    plan = claim_generic_plan(profile_for(node))
    # Each class's first tasks in the queue's order, read through either queue index (which
    # one depends on the queue's size: at a million tasks, the class index).
    assert re.search(r"Limit .*\n.*Index Scan using task_claim_(bucket|queue)", plan), plan
    assert "Bitmap" not in plan, plan
    # One sort: the merge of each class's first candidates, not of the queue.
    assert plan.count("Sort Key") == 1, plan


def test_postgresql_keeps_the_claims_generic_plan(alice, bob):
    _queue(alice, 20)
    node, _ = online_node(bob)
    profile = profile_for(node)
    for _ in range(12):
        assert task_claim(profile=profile) is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH node AS%%'"
        )
        rows = cursor.fetchall()
    assert len(rows) == 1, rows
    generic, custom = rows[0]
    # psycopg prepares once a statement has run prepare_threshold (5) times; PostgreSQL plans
    # the first five executions of the prepared statement for their values, then compares.
    assert generic >= 1, rows
    assert custom <= 5, rows
