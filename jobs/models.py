"""Jobs, their tasks (one per slice) and the attempts that lease them.

A job is what a submitter asked for; each of its N slices is a task claimed independently; each
claim of a task creates an attempt holding a random lease token. Only the current attempt's token
can report progress, logs, completion or failure (fencing): a stale token changes nothing.
"""

import secrets
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobs.artifact_storage import artifact_storage


class JobKind(models.TextChoices):
    CONTAINER = "container"
    SCRIPT = "script"


class JobState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskState(models.TextChoices):
    QUEUED = "queued"
    LEASED = "leased"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AttemptState(models.TextChoices):
    LEASED = "leased"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"  # the lease expired, the node went offline or handed it back (jobs.hand_back)
    CANCELLED = "cancelled"


class FailureClass(models.TextChoices):
    JOB = "job"  # the job's own failure: non-zero exit; charged for the time used
    INFRA = "infra"  # agent died, sandbox error, OOM: retried elsewhere, not charged
    TIMEOUT = "timeout"


class Verdict(models.TextChoices):
    """What the hub concluded of an attempt's result by comparing it with other nodes'."""

    UNCHECKED = ""  # nobody compared it: a task that is not verified
    PENDING = "pending"  # its result waits for the other replicas of its slice
    AGREED = "agreed"  # in the canonical group: paid
    REJECTED = "rejected"  # disagreed with the canonical result: not paid, counted against it
    UNDECIDED = "undecided"  # the slice reached no quorum, or was cancelled first


TERMINAL_TASK_STATES = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)
ACTIVE_ATTEMPT_STATES = (AttemptState.LEASED, AttemptState.RUNNING)


def default_retention_days() -> int:
    return settings.JOB_ARTIFACT_RETENTION_DAYS


class Job(models.Model):
    # No index of its own: job_submitter_recent (submitter, -id) leads with it. Every index on
    # the hot tables is written by every claim and completion.
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=JobKind.choices)
    # What runs: image, command, script, interpreter, env, inputs (base64). Signed per task.
    spec = models.JSONField()
    # Requirements: hard gates the claim filters on (copied onto each task for the index).
    min_vram_mb = models.PositiveIntegerField(default=0)
    cpu_cores = models.PositiveSmallIntegerField(default=1)
    ram_mb = models.PositiveIntegerField(default=512)
    disk_mb = models.PositiveIntegerField(default=256)
    gpu_count = models.PositiveSmallIntegerField(default=0)
    gpu_tiers = models.JSONField(default=list, blank=True)  # allow-list of tier slugs; [] = any
    min_compute_capability = models.PositiveSmallIntegerField(default=0)  # 75 means 7.5
    region = models.CharField(max_length=2, blank=True)  # ISO-2; "" = anywhere
    priority = models.SmallIntegerField(default=0)
    slices = models.PositiveIntegerField(default=1)
    timeout_s = models.PositiveIntegerField()
    max_attempts = models.PositiveSmallIntegerField(default=3)
    price_ceiling = models.PositiveIntegerField()  # credit minor units per second, per task
    # Result verification the submitter asked for (jobs.verification): each slice runs on
    # `replicas` nodes of distinct operators and its result is the one `quorum` of them agree
    # on. 1 and 1: not asked (the hub may still spot-check a slice).
    replicas = models.PositiveSmallIntegerField(default=1, db_default=1)
    quorum = models.PositiveSmallIntegerField(default=1, db_default=1)
    # Tasks added after submission (a replica to break a disagreement, a spot-check): the job
    # has slices × replicas + extra_tasks tasks, and ends when every one of them has.
    extra_tasks = models.PositiveIntegerField(default=0, db_default=0)
    # NULL, not "": many jobs have no key, and the unique constraint must ignore them.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    request_fingerprint = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED)
    # Counters maintained with the task transitions; the job ends when done == slices.
    tasks_succeeded = models.PositiveIntegerField(default=0)
    tasks_failed = models.PositiveIntegerField(default=0)
    tasks_cancelled = models.PositiveIntegerField(default=0)
    max_cost = models.BigIntegerField(default=0)  # held at submission: ceiling × timeout × slices
    # The submitter's first cancel (JobCancelRequested). Every attempt of the job is then asked
    # to stop and ends cancelled, the ones a cancel could not flag too: a task requeued and
    # claimed again between two of the cancel's looks (jobs.cancellation).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Retention (jobs.retention): the job's outputs are kept this many days after it ends
    # (its submitter's choice, else JOB_ARTIFACT_RETENTION_DAYS), until `artifacts_expire_at`,
    # set when it ends; beat then deletes them and sets `artifacts_expired_at`.
    retention_days = models.PositiveIntegerField(default=default_retention_days)
    artifacts_expire_at = models.DateTimeField(null=True, blank=True)
    artifacts_expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["submitter", "idempotency_key"],
                name="job_submitter_idempotency",
                condition=Q(idempotency_key__isnull=False),
            ),
        ]
        indexes = [
            models.Index(fields=["submitter", "-id"], name="job_submitter_recent"),
            # Beat's look for outputs due for deletion (jobs.retention): WHERE
            # artifacts_expire_at <= now() AND artifacts_expired_at IS NULL. Only the jobs
            # whose outputs are still kept are in it.
            models.Index(
                fields=["artifacts_expire_at"],
                name="job_artifacts_due",
                condition=Q(artifacts_expire_at__isnull=False, artifacts_expired_at__isnull=True),
            ),
            # The network page's jobs finished today: WHERE finished_at >= midnight, counted by
            # state from the index alone. Partial, so a job enters it once, when it ends.
            models.Index(
                fields=["finished_at"],
                include=["state"],
                name="job_finished",
                condition=Q(finished_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.state})"

    @property
    def stream(self) -> str:
        return f"job:{self.pk}"

    @property
    def tasks_done(self) -> int:
        return self.tasks_succeeded + self.tasks_failed + self.tasks_cancelled

    @property
    def tasks_total(self) -> int:
        return self.slices * self.replicas + self.extra_tasks

    def task(
        self, index: int, *, at: datetime, replica: int = 0, trusted_only: bool = False
    ) -> "Task":
        """A new task of this job, queued from `at`, with the job's hard gates copied onto it
        (the claim reads one table): a slice's at submission, or a replica added later."""
        return Task(
            job=self,
            index=index,
            replica=replica,
            trusted_only=trusted_only,
            priority=self.priority,
            min_vram_mb=self.min_vram_mb,
            cpu_cores=self.cpu_cores,
            ram_mb=self.ram_mb,
            disk_mb=self.disk_mb,
            gpu_count=self.gpu_count,
            tier_allow=sorted(set(self.gpu_tiers)),
            min_compute_capability=self.min_compute_capability,
            region=self.region,
            price_ceiling=self.price_ceiling,
            max_attempts=self.max_attempts,
            created_at=at,
            available_at=at,
        )


class Task(models.Model):
    # Indexed by task_job_index (job, index), which leads with it.
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    index = models.PositiveIntegerField()
    # 0 for a slice's only task; 1, 2, … for the replicas of a verified slice (jobs.verification),
    # which run on nodes of distinct operators and get the same slice index.
    replica = models.PositiveSmallIntegerField(default=0, db_default=0)
    # A spot-check's replica: only a trusted node may take it.
    trusted_only = models.BooleanField(default=False, db_default=False)
    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.QUEUED)
    # Denormalised from the job so the claim reads one table through one index.
    priority = models.SmallIntegerField(default=0)
    min_vram_mb = models.PositiveIntegerField(default=0)
    cpu_cores = models.PositiveSmallIntegerField(default=1)
    ram_mb = models.PositiveIntegerField(default=512)
    disk_mb = models.PositiveIntegerField(default=256)
    gpu_count = models.PositiveSmallIntegerField(default=0)
    # The GPU tiers the job allows; empty for any tier.
    tier_allow = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    min_compute_capability = models.PositiveSmallIntegerField(default=0)
    region = models.CharField(max_length=2, blank=True)
    price_ceiling = models.PositiveIntegerField()
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    # Backoff: a requeued task is claimable again only after this.
    available_at = models.DateTimeField(default=timezone.now)
    # Nodes that lost or failed this task, not handed it again until the exclusion's grace ends.
    excluded_nodes = ArrayField(models.BigIntegerField(), default=list, blank=True)
    current_attempt = models.ForeignKey(
        "Attempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    version = models.PositiveIntegerField(default=0)  # the task:<id> stream's version
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The queue's bucket by cores, RAM and GPU (jobs.size_class), set by the database's trigger
    # when the task is inserted, so that no writer of tasks can put one in the wrong bucket: what
    # a writer gives is replaced (an ORM instance keeps its 0 until it is read again).
    size_class = models.SmallIntegerField(default=0, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "index", "replica"], name="task_job_index"),
        ]
        indexes = [
            # The claim: WHERE state = 'queued' AND available_at <= now() … ORDER BY priority
            # DESC, min_vram_mb DESC, id. Partial, so it holds only the queue, not history.
            models.Index(
                fields=["-priority", "-min_vram_mb", "id"],
                name="task_claim_queue",
                condition=Q(state="queued"),
            ),
            # A small node's claim: the same order within each size class it fits
            # (WHERE size_class = ? AND state = 'queued' …), one probe per class.
            models.Index(
                fields=["size_class", "-priority", "-min_vram_mb", "id"],
                name="task_claim_bucket",
                condition=Q(state="queued"),
            ),
            # The market's demand by tier (tier_allow @> ARRAY[tier]) among queued tasks that
            # name tiers at all: most allow any tier and stay out of it.
            GinIndex(
                fields=["tier_allow"],
                name="task_tier_allow",
                condition=Q(state="queued") & ~Q(tier_allow=[]),
            ),
            # When the first backoff ends (jobs.selectors.queue_backoff_ends): requeued tasks
            # only (a fresh task has attempts 0 and is claimable at once), so submissions and
            # claims write nothing into it.
            models.Index(
                fields=["available_at"],
                name="task_backoff_due",
                condition=Q(state="queued", attempts__gt=0),
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.pk} ({self.job_id}#{self.index}, {self.state})"

    @property
    def stream(self) -> str:
        return f"task:{self.pk}"


def new_lease_token() -> str:
    return secrets.token_urlsafe(24)


class Attempt(models.Model):
    # Indexed by attempt_task_number (task, number), which leads with it.
    task = models.ForeignKey(
        Task, on_delete=models.PROTECT, related_name="attempt_set", db_index=False
    )
    node = models.ForeignKey("nodes.Node", on_delete=models.PROTECT, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    # Unique by the constraint below: a field's unique=True would add a pattern index on
    # PostgreSQL that no query uses and every claim and completion would write.
    lease_token = models.CharField(max_length=64, default=new_lease_token)
    state = models.CharField(
        max_length=16, choices=AttemptState.choices, default=AttemptState.LEASED
    )
    leased_at = models.DateTimeField(default=timezone.now)  # runtime is measured from here
    lease_expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    runtime_ms = models.PositiveBigIntegerField(null=True, blank=True)  # server-measured
    reported_runtime_s = models.FloatField(null=True, blank=True)  # informational only
    price_per_s = models.PositiveIntegerField(default=0)  # the node's price when it claimed
    exit_code = models.IntegerField(null=True, blank=True)
    failure_class = models.CharField(max_length=16, choices=FailureClass.choices, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    progress = models.PositiveSmallIntegerField(default=0)
    message = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    log_bytes = models.PositiveBigIntegerField(default=0)
    # A database default too: the claim's statement inserts attempts (jobs/sql/claim_lease.sql).
    verdict = models.CharField(
        max_length=16, choices=Verdict.choices, blank=True, default="", db_default=""
    )
    verdict_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="attempt_task_number"),
            models.UniqueConstraint(fields=["lease_token"], name="attempt_lease_token"),
        ]
        indexes = [
            # The reaper: WHERE state IN ('leased','running') AND lease_expires_at < now().
            models.Index(
                fields=["lease_expires_at"],
                name="attempt_active_expiry",
                condition=Q(state__in=["leased", "running"]),
            ),
            models.Index(
                fields=["node"],
                name="attempt_active_node",
                condition=Q(state__in=["leased", "running"]),
            ),
            # The network page's leaderboard: SUM(runtime_ms) of agreed attempts by node, read
            # from the index alone (runtime_ms included); an attempt enters it at its verdict.
            models.Index(
                fields=["node"],
                name="attempt_agreed_node",
                include=["runtime_ms"],
                condition=Q(verdict="agreed"),
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.pk} of task {self.task_id} on node {self.node_id}"


class VerificationReason(models.TextChoices):
    REQUESTED = "requested"  # the submitter asked for replicas: the submitter pays each
    SPOT_CHECK = "spot_check"  # the hub checks a node it does not trust yet: the platform pays


class VerificationState(models.TextChoices):
    OPEN = "open"
    AGREED = "agreed"
    NO_QUORUM = "no_quorum"
    CANCELLED = "cancelled"


class Verification(models.Model):
    """One slice whose result is decided by comparing replicas (jobs.verification). Its row is
    the lock that serialises the slice's verdict: replicas ending together wait on it."""

    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="+", db_index=False)
    index = models.PositiveIntegerField()
    reason = models.CharField(max_length=16, choices=VerificationReason.choices)
    quorum = models.PositiveSmallIntegerField()
    # The most replicas the slice may run: those asked for, then one more each time the ended
    # ones can no longer reach the quorum, until this many have run.
    budget = models.PositiveSmallIntegerField()
    state = models.CharField(
        max_length=16, choices=VerificationState.choices, default=VerificationState.OPEN
    )
    detail = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="verification_job_index"),
        ]
        indexes = [
            # The reaper's look for slices left undecided: the open ones only.
            models.Index(fields=["id"], name="verification_open", condition=Q(state="open")),
        ]

    def __str__(self) -> str:
        return f"verification of job {self.job_id} slice {self.index} ({self.state})"


class LogChunk(models.Model):
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="log_chunks")
    stream = models.CharField(max_length=6, choices=[("stdout", "stdout"), ("stderr", "stderr")])
    seq = models.PositiveIntegerField()
    data = models.TextField()
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "stream", "seq"], name="logchunk_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.stream} #{self.seq} of attempt {self.attempt_id}"


def artifact_path(instance: "Artifact", filename: str) -> str:
    return f"artifacts/job-{instance.attempt.task.job_id}/attempt-{instance.attempt_id}/{filename}"


class Artifact(models.Model):
    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="artifacts")
    name = models.CharField(max_length=200)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    file = models.FileField(upload_to=artifact_path, storage=artifact_storage, max_length=400)
    created_at = models.DateTimeField(default=timezone.now)
    # When retention deleted the stored file (jobs.retention); the row stays, with its name,
    # size and checksum, so the job still says what it produced.
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="artifact_attempt_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.size} B)"
