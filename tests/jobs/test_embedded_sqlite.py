"""The heartbeat's lease statement (UPDATE … RETURNING with the job's cancel flag) also runs on
the embedded SQLite default, where the demo's agent sends its leases."""

from tests.embedded import embedded_migrated, script_lines

SCRIPT = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from jobs.cancellation import job_cancel
from jobs.claim import task_claim
from jobs.leases import leases_extend
from jobs.models import Attempt, Job
from jobs.node_profile import profile_for
from jobs.serializers import JobIn
from jobs.submission import job_submit
from ledger.funding import credits_grant
from ledger.verify import verify_ledger
from nodes.models import Node
from nodes.services import node_heartbeat, node_register

users = get_user_model().objects
submitter, operator = users.create_user("sub"), users.create_user("op")
credits_grant(user_id=submitter.pk, amount=10**6, actor="test", reference="t", idempotency_key="k")
body = JobIn(data={"kind": "script", "script": "true", "slices": 1, "timeout_s": 60,
                   "price_ceiling": 500, "max_attempts": 3})
body.is_valid(raise_exception=True)
job = job_submit(submitter_id=submitter.pk, data=body.validated_data).job
node = node_register(operator=operator, name="n", region="IN", actor="test",
                     capabilities={"gpus": [], "ram_mb": 4096, "disk_free_mb": 10000,
                                   "cpu": {"physical_cores": 4, "logical_cores": 4}})[0]
node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[],
               now=timezone.now())
lease = task_claim(profile=profile_for(Node.objects.get(pk=node.pk)))
assert lease is not None, "the node was given no task"
before = Attempt.objects.get().lease_expires_at
reply = leases_extend(node, [lease.lease_token, "gone"])
print("leases", list(reply["leases"]) == [lease.lease_token], reply["cancel"] == ["gone"])
print("extended", Attempt.objects.get().lease_expires_at > before)
job_cancel(job=Job.objects.get(pk=job.pk), actor="test")
Attempt.objects.update(cancel_requested=False)  # only the job's flag says stop now
reply = leases_extend(node, [lease.lease_token])
print("cancel", reply["cancel"] == [lease.lease_token])
print("problems", [p for p in verify_ledger(check_chain=False).problems if p.startswith("jobs")])
"""


def test_the_heartbeats_leases_and_the_jobs_cancel_flag_on_the_embedded_sqlite(tmp_path):
    env = embedded_migrated(tmp_path)
    assert script_lines(SCRIPT, env) == [
        "leases True True",
        "extended True",
        "cancel True",
        "problems []",
    ]
