"""Input validation for jobs (field-level 400s) and the shapes the API returns."""

import base64
import binascii
import re

from django.conf import settings
from rest_framework import serializers

from core.api.fields import REGION_HELP, RegionField
from core.outbound import MAX_URL_LENGTH, url_problem
from jobs.models import Artifact, Attempt, Job, JobKind, LogChunk, Task
from ledger.quotes import max_hold

IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,199}(:[A-Za-z0-9._-]{1,128})?$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
INPUT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_INPUT_BYTES = 1024 * 1024
MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_SLICES = 10_000


class RequirementsIn(serializers.Serializer):
    min_vram_mb = serializers.IntegerField(min_value=0, max_value=1_048_576, default=0)
    cpu_cores = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    ram_mb = serializers.IntegerField(min_value=16, max_value=4_194_304, default=512)
    disk_mb = serializers.IntegerField(min_value=0, max_value=16_777_216, default=256)
    gpu_count = serializers.IntegerField(min_value=0, max_value=16, default=0)
    gpu_tiers = serializers.ListField(
        child=serializers.CharField(max_length=32), max_length=32, default=list
    )
    min_compute_capability = serializers.RegexField(
        r"^\d{1,2}\.\d$",
        required=False,
        allow_null=True,
        default=None,
        help_text='e.g. "7.5"',
    )
    region = RegionField(
        required=False, allow_blank=True, default="", help_text=f"{REGION_HELP}; blank for anywhere"
    )

    def validate_gpu_tiers(self, value: list[str]) -> list[str]:
        from jobs.billing import known_tiers

        unknown = sorted(set(value) - known_tiers())
        if unknown:
            raise serializers.ValidationError(f"unknown GPU tier(s): {', '.join(unknown)}")
        return sorted(set(value))

    def validate(self, attrs: dict) -> dict:
        cc = attrs.pop("min_compute_capability", None)
        attrs["min_compute_capability"] = int(cc.replace(".", "")) if cc else 0
        if attrs["min_vram_mb"] and not attrs["gpu_count"]:
            attrs["gpu_count"] = 1  # asking for VRAM means asking for a GPU
        return attrs


class VerificationIn(serializers.Serializer):
    replicas = serializers.IntegerField(
        min_value=2, help_text="how many nodes, of distinct operators, run each slice"
    )
    quorum = serializers.IntegerField(
        min_value=2, help_text="how many of them must agree on the exit code and every output"
    )

    def validate_replicas(self, value: int) -> int:
        if value > settings.JOB_MAX_REPLICAS:
            raise serializers.ValidationError(f"at most {settings.JOB_MAX_REPLICAS} replicas")
        return value

    def validate(self, attrs: dict) -> dict:
        if attrs["quorum"] > attrs["replicas"]:
            raise serializers.ValidationError({"quorum": ["cannot be more than replicas"]})
        return attrs


class JobIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    kind = serializers.ChoiceField(choices=JobKind.choices)
    image = serializers.RegexField(IMAGE_RE, required=False, allow_blank=True, default="")
    command = serializers.ListField(
        child=serializers.CharField(max_length=4096, allow_blank=True),
        max_length=64,
        required=False,
        default=list,
    )
    script = serializers.CharField(
        max_length=256 * 1024, required=False, allow_blank=False, trim_whitespace=False
    )
    interpreter = serializers.ChoiceField(choices=["sh", "python"], required=False, default="sh")
    env = serializers.DictField(
        child=serializers.CharField(max_length=4096, allow_blank=True), required=False, default=dict
    )
    inputs = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        default=dict,
        help_text="file name -> base64 content, readable by the job under /in",
    )
    requirements = RequirementsIn(required=False)
    priority = serializers.IntegerField(min_value=-100, max_value=100, default=0)
    slices = serializers.IntegerField(min_value=1, max_value=MAX_SLICES, default=1)
    timeout_s = serializers.IntegerField(min_value=1, max_value=MAX_TIMEOUT_S, default=600)
    max_attempts = serializers.IntegerField(min_value=1, max_value=10, default=3)
    price_ceiling = serializers.IntegerField(
        min_value=1,
        max_value=1_000_000,
        help_text="the most you pay per second per task, in credit minor units",
    )
    verification = VerificationIn(
        required=False,
        help_text="run each slice on several nodes and keep the result a quorum agrees on; "
        "each replica is paid (docs/api.md, Verified results)",
    )
    retention_days = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="how many days the outputs are kept after the job ends (default: the hub's, "
        "JOB_ARTIFACT_RETENTION_DAYS; at most JOB_ARTIFACT_RETENTION_MAX_DAYS)",
    )
    webhook_url = serializers.CharField(
        max_length=MAX_URL_LENGTH,
        required=False,
        help_text="POSTed a signed JSON body when the job ends (docs/api.md, Webhooks)",
    )

    def validate_webhook_url(self, value: str) -> str:
        problem = url_problem(value, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate_retention_days(self, value: int) -> int:
        if value > settings.JOB_ARTIFACT_RETENTION_MAX_DAYS:
            raise serializers.ValidationError(
                f"at most {settings.JOB_ARTIFACT_RETENTION_MAX_DAYS} days"
            )
        return value

    def validate_env(self, value: dict) -> dict:
        if len(value) > 64:
            raise serializers.ValidationError("at most 64 variables")
        bad = [k for k in value if not ENV_NAME_RE.match(k) or k.startswith("CP_")]
        if bad:
            raise serializers.ValidationError(f"invalid or reserved variable name(s): {bad}")
        return value

    def validate_inputs(self, value: dict) -> dict:
        total = 0
        for name, content in value.items():
            if not INPUT_NAME_RE.match(name):
                raise serializers.ValidationError(f"invalid input file name {name!r}")
            try:
                total += len(base64.b64decode(content, validate=True))
            except (binascii.Error, ValueError):
                raise serializers.ValidationError(f"{name}: not valid base64") from None
        if total > MAX_INPUT_BYTES:
            raise serializers.ValidationError(f"inputs are limited to {MAX_INPUT_BYTES} bytes")
        return value

    def validate(self, attrs: dict) -> dict:
        if "requirements" not in attrs:
            attrs["requirements"] = RequirementsIn().run_validation({})
        if attrs["kind"] == JobKind.CONTAINER:
            errors = {}
            if not attrs.get("image"):
                errors["image"] = ["a container job needs an image"]
            if not attrs.get("command"):
                errors["command"] = ["a container job needs a command"]
            if attrs.get("script"):
                errors["script"] = ["a container job runs a command, not a script"]
            if errors:
                raise serializers.ValidationError(errors)
        elif not attrs.get("script"):
            raise serializers.ValidationError({"script": ["a script job needs a script"]})
        max_cost = job_max_cost(attrs)
        if max_cost > settings.JOB_MAX_COST:
            raise serializers.ValidationError(
                {
                    "price_ceiling": [
                        f"ceiling × timeout × slices × replicas = {max_cost} passes the "
                        f"{settings.JOB_MAX_COST} limit for one job"
                    ]
                }
            )
        return attrs


def job_max_cost(data: dict) -> int:
    """What a job holds at submission (ledger.quotes.max_hold)."""
    return max_hold(
        ceiling_per_s_minor=data["price_ceiling"],
        timeout_s=data["timeout_s"],
        slices=data["slices"],
        replicas=(data.get("verification") or {}).get("replicas", 1),
    )


class ArtifactOut(serializers.ModelSerializer):
    class Meta:
        model = Artifact
        # deleted_at: when retention deleted the stored file (it can no longer be downloaded).
        fields = ("id", "name", "size", "sha256", "created_at", "deleted_at")


class AttemptOut(serializers.ModelSerializer):
    artifacts = ArtifactOut(many=True, read_only=True)

    class Meta:
        model = Attempt
        fields = (
            "id",
            "number",
            "node_id",
            "state",
            "leased_at",
            "lease_expires_at",
            "finished_at",
            "runtime_ms",
            "price_per_s",
            # Of a verified slice's replica: pending, agreed (the result stands, paid),
            # rejected (it disagreed: not paid) or undecided; blank when nothing compared it.
            "verdict",
            "exit_code",
            "failure_class",
            "detail",
            "progress",
            "message",
            "stdout_tail",
            "stderr_tail",
            "artifacts",
        )


class TaskOut(serializers.ModelSerializer):
    attempts = AttemptOut(source="attempt_set", many=True, read_only=True)

    class Meta:
        model = Task
        fields = ("id", "index", "replica", "state", "attempts", "available_at", "finished_at")
        # "attempts" here is the list; the count is len(attempts).


class JobOut(serializers.ModelSerializer):
    requirements = serializers.SerializerMethodField()
    verification = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = (
            "id",
            "name",
            "kind",
            "state",
            "priority",
            "slices",
            "timeout_s",
            "max_attempts",
            "price_ceiling",
            "max_cost",
            "verification",
            "tasks_succeeded",
            "tasks_failed",
            "tasks_cancelled",
            "requirements",
            "created_at",
            "finished_at",
            # Set by the first cancel: the job may still be running while its tasks stop.
            "cancel_requested_at",
            # Its outputs are kept retention_days after it ends, until artifacts_expire_at;
            # artifacts_expired_at is when they were deleted.
            "retention_days",
            "artifacts_expire_at",
            "artifacts_expired_at",
        )

    def get_verification(self, job: Job) -> dict | None:
        if job.replicas == 1:
            return None
        return {"replicas": job.replicas, "quorum": job.quorum}

    def get_requirements(self, job: Job) -> dict:
        return {
            "min_vram_mb": job.min_vram_mb,
            "cpu_cores": job.cpu_cores,
            "ram_mb": job.ram_mb,
            "disk_mb": job.disk_mb,
            "gpu_count": job.gpu_count,
            "gpu_tiers": job.gpu_tiers,
            "min_compute_capability": (
                f"{job.min_compute_capability // 10}.{job.min_compute_capability % 10}"
                if job.min_compute_capability
                else None
            ),
            "region": job.region,
        }


class JobDetailOut(JobOut):
    tasks = TaskOut(many=True, read_only=True)
    spec = serializers.JSONField(read_only=True)

    class Meta(JobOut.Meta):
        fields = (*JobOut.Meta.fields, "spec", "tasks")


class LogChunkOut(serializers.ModelSerializer):
    class Meta:
        model = LogChunk
        fields = ("id", "stream", "seq", "data", "received_at")


class TimelineOut(serializers.Serializer):
    id = serializers.IntegerField()
    stream = serializers.CharField()
    type = serializers.CharField()
    payload = serializers.JSONField()
    actor = serializers.CharField()
    recorded_at = serializers.DateTimeField()


# --- agent side -----------------------------------------------------------------------------


class ClaimIn(serializers.Serializer):
    wait = serializers.FloatField(min_value=0, max_value=30, default=0)


class LeaseIn(serializers.Serializer):
    lease_token = serializers.CharField(max_length=64)


class ProgressIn(LeaseIn):
    progress = serializers.IntegerField(min_value=0, max_value=100)
    message = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class LogIn(LeaseIn):
    stream = serializers.ChoiceField(choices=["stdout", "stderr"])
    seq = serializers.IntegerField(min_value=0, max_value=10_000_000)
    data = serializers.CharField(max_length=256 * 1024, allow_blank=True, trim_whitespace=False)


class ArtifactIn(LeaseIn):
    name = serializers.RegexField(INPUT_NAME_RE)
    sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$")
    file = serializers.FileField()


class ArtifactRef(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    size = serializers.IntegerField(min_value=0, required=False)
    sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$")


class CompleteIn(LeaseIn):
    exit_code = serializers.IntegerField(min_value=-1024, max_value=1024, default=0)
    stdout_tail = serializers.CharField(
        allow_blank=True, required=False, default="", trim_whitespace=False, max_length=256 * 1024
    )
    stderr_tail = serializers.CharField(
        allow_blank=True, required=False, default="", trim_whitespace=False, max_length=256 * 1024
    )
    artifacts = ArtifactRef(many=True, required=False, default=list)
    reported_runtime_s = serializers.FloatField(
        min_value=0, required=False, allow_null=True, default=None
    )
    want_next = serializers.BooleanField(default=False)


class HandBackIn(LeaseIn):
    reason = serializers.CharField(max_length=500)


class FailIn(LeaseIn):
    failure_class = serializers.ChoiceField(choices=["job", "infra", "timeout"])
    # "thermal": the agent stopped the work because its GPU reached the critical temperature.
    reason = serializers.ChoiceField(
        choices=["thermal"], required=False, allow_null=True, default=None
    )
    exit_code = serializers.IntegerField(
        min_value=-1024, max_value=1024, required=False, allow_null=True, default=None
    )
    detail = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="")
    stdout_tail = serializers.CharField(
        allow_blank=True, required=False, default="", trim_whitespace=False, max_length=256 * 1024
    )
    stderr_tail = serializers.CharField(
        allow_blank=True, required=False, default="", trim_whitespace=False, max_length=256 * 1024
    )
