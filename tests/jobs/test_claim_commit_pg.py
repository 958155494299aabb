"""A claim that is its own transaction commits without waiting for the WAL's flush, and only its
own transaction: the setting neither outlives the claim on its connection nor reaches a caller's
transaction, whose other writes did not agree to it."""

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs.claim import claim_statement, task_claim
from jobs.models import Attempt, Task
from jobs.node_profile import profile_for
from tests.jobs.conftest import claim, job_body, online_node
from tests.pgsession import setting
from tests.pgsession import sql as _sql

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _setting() -> str:
    return setting("synchronous_commit")


def _submit(client) -> None:
    response = client.post("/api/v1/jobs/", job_body(), format="json")
    assert response.status_code == 201, response.json()


class _Statements(list):
    def __call__(self, execute, sql, params, many, context):
        self.append((sql, params))
        return execute(sql, params, many, context)

    def claims(self) -> list[dict]:
        """The parameters of each claim statement sent."""
        return [params for sql, params in self if "WITH node AS" in sql]


def test_a_claim_commits_lazily_and_only_itself(submitter, bob):
    _submit(submitter)
    _, agent = online_node(bob)
    _sql("SET synchronous_commit = on")  # whatever the server's default: the claim's differs
    statements = _Statements()
    try:
        with connection.execute_wrapper(statements):
            response = claim(agent)
        setting = _setting()
    finally:
        _sql("RESET synchronous_commit")
    assert response.status_code == 200
    (params,) = statements.claims()
    assert params["lazy"] is True
    lease = response.json()
    # Committed: another connection sees the attempt and the leased task.
    attempt = Attempt.objects.get(pk=lease["attempt_id"])
    assert attempt.lease_token == lease["lease_token"]
    assert Task.objects.get(pk=attempt.task_id).state == "leased"
    assert setting == "on"  # local to the claim's transaction: the session keeps its own


def test_the_lazy_statement_turns_the_flush_off_for_its_own_transaction(submitter, bob):
    # The setting is a side effect of a subquery no column reads: it must still run.
    _submit(submitter)
    node, _ = online_node(bob)
    sql, params, _ = claim_statement(profile_for(node), timezone.now(), lazy=True)
    with transaction.atomic():
        _sql("SET LOCAL synchronous_commit = on")
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            assert cursor.fetchone() is not None
        assert _setting() == "off"
        transaction.set_rollback(True)
    assert not Attempt.objects.exists()
    assert _setting() == "on"


def test_a_claim_inside_a_transaction_leaves_its_commit_alone(submitter, bob):
    _submit(submitter)
    node, _ = online_node(bob)
    statements = _Statements()
    with transaction.atomic():
        _sql("SET LOCAL synchronous_commit = on")
        with connection.execute_wrapper(statements):
            lease = task_claim(profile=profile_for(node))
        assert lease is not None
        assert _setting() == "on"
    (params,) = statements.claims()
    assert params["lazy"] is False


def test_a_claim_with_autocommit_off_leaves_its_commit_alone(submitter, bob):
    _submit(submitter)
    node, _ = online_node(bob)
    connection.set_autocommit(False)  # the caller's transaction, outside any atomic block
    try:
        _sql("SET LOCAL synchronous_commit = on")
        assert task_claim(profile=profile_for(node)) is not None
        assert _setting() == "on"
        connection.commit()
    finally:
        connection.set_autocommit(True)
    assert Attempt.objects.count() == 1
