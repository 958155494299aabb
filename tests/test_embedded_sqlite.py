"""The embedded default: several processes writing one SQLite file, as the demo's hub, worker
and beat do, never hit "database is locked", and the books still verify."""

from tests.embedded import embedded_migrated, run, script_lines

WRITER = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.db import transaction
from ledger.chain import chain_seal
from ledger.services import account_open, transfer
with transaction.atomic():
    funding = account_open(code="external:funding", kind="funding")
    mine = account_open(code=f"writer:{sys.argv[1]}", kind="available")
for i in range(40):
    transfer(source=funding, destination=mine, amount=i + 1, actor="writer")
    if i % 10 == 0:
        chain_seal()
"""


def test_concurrent_writers_share_the_sqlite_file(tmp_path):
    env = embedded_migrated(tmp_path)
    writers = [run(["-c", WRITER, str(i)], env) for i in range(3)]
    for writer in writers:
        assert writer.wait(120) == 0, writer.stderr.read()
    seal = run(["manage.py", "seal_ledger"], env)
    assert seal.wait(60) == 0, seal.stderr.read()
    verify = run(["manage.py", "verify_ledger"], env)
    assert verify.wait(60) == 0, verify.stderr.read()
    out = verify.stdout.read()
    # 3 writers x (2 accounts opened, one deduplicated funding, 40 transfers) = at least 120 + 4.
    assert "ledger OK" in out
    events = int(out.split("ledger OK: ")[1].split(" events")[0])
    assert events >= 3 * 40 + 4


JOB_FLOW = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from jobs.attempts import attempt_complete
from jobs.claim import task_claim
from jobs.models import Task
from jobs.node_profile import profile_for
from jobs.serializers import JobIn
from jobs.submission import job_submit
from ledger.funding import credits_grant
from ledger.verify import verify_ledger
from nodes.models import Node
from nodes.services import node_heartbeat, node_register
from people.services import user_create

op = user_create(username="op", roles=["operator"])
sub = user_create(username="sub", roles=["submitter"])
# A node small enough to claim through the queue's size classes on PostgreSQL (4 cores, 4 GB):
# on SQLite it must take the queue's own statement.
caps = {"gpus": [], "cpu": {"model": "x", "arch": "x86_64", "physical_cores": 4,
        "logical_cores": 4, "avx": True, "avx2": True, "avx512": False}, "ram_mb": 4000,
        "disk_free_mb": 9000, "os": {}, "sandboxes": [], "detection": {}, "agent_version": "t"}
node, _ = node_register(operator=op, name="n", region="IN", capabilities=caps, actor="t")
node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[])
credits_grant(user_id=sub.pk, amount=10**6, actor="t", reference="t", idempotency_key="k")
data = JobIn(data={"kind": "script", "script": "true", "slices": 2, "price_ceiling": 100,
                   "requirements": {"cpu_cores": 2, "ram_mb": 2048}})
data.is_valid(raise_exception=True)
job = job_submit(submitter_id=sub.pk, data=data.validated_data).job
# The insert trigger set each task's size class (2 cores, 2 GB: class 34).
assert list(Task.objects.values_list("size_class", flat=True)) == [34, 34]
profile = profile_for(Node.objects.get(pk=node.pk))
assert profile.size_classes is not None
for _ in range(2):
    lease = task_claim(profile=profile)
    attempt_complete(attempt_id=lease.attempt_id, token=lease.lease_token, node_id=node.pk,
                     exit_code=0)
assert task_claim(profile=profile) is None
job.refresh_from_db()
report = verify_ledger()
print(job.state, report.ok, report.problems)
"""


def test_the_job_path_runs_on_the_embedded_sqlite(tmp_path):
    env = embedded_migrated(tmp_path)
    assert script_lines(JOB_FLOW, env) == ["succeeded True []"]
