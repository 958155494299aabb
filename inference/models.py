"""The model catalog: what the pool may serve through the OpenAI-compatible relay.

An admin registers a model under the name clients send, with its GGUF file (uploaded to the
hub's storage, or a path under INFERENCE_MODELS_DIR that the hub serves), the file's sha256 and
size (computed by the hub from the file; a sha256 the admin gives must match), and what running
it needs. Agents fetch the file from the hub only and check the sha256 before use.
"""

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

# The name clients send; the price book keys the model's token prices by it.
from ledger.models_pricing import model_name_validator

sha256_validator = RegexValidator(r"^[0-9a-f]{64}$", "64 lowercase hexadecimal digits")
# A path under INFERENCE_MODELS_DIR: no absolute path, no "..", no hidden parts.
relative_path_validator = RegexValidator(
    r"^(?!/)(?!.*(^|/)\.)[A-Za-z0-9._/-]{1,255}\.gguf$",
    "a relative path to a .gguf file under the models directory, without '..' or hidden parts",
)


class InferenceModel(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[model_name_validator])
    file = models.FileField(upload_to="models/", blank=True, help_text="The GGUF file, uploaded.")
    path = models.CharField(
        max_length=255,
        blank=True,
        validators=[relative_path_validator],
        help_text="Or the GGUF file's path under INFERENCE_MODELS_DIR, which the hub serves.",
    )
    sha256 = models.CharField(max_length=64, validators=[sha256_validator], editable=False)
    size_bytes = models.PositiveBigIntegerField(editable=False)
    quantization = models.CharField(max_length=16, help_text='e.g. "Q4_K_M", "F16"')
    context_length = models.PositiveIntegerField(
        validators=[MinValueValidator(256)], help_text="Tokens of context the engine is given."
    )
    vram_mb = models.PositiveIntegerField(
        default=0, help_text="GPU memory it needs to run on a GPU (0: not offered on GPUs)."
    )
    ram_mb = models.PositiveIntegerField(
        default=0, help_text="Memory it needs to run on a CPU (0: not offered on CPUs)."
    )
    enabled = models.BooleanField(default=True, help_text="Offered to clients.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            # Exactly one source for the file.
            models.CheckConstraint(
                condition=(Q(file="") & ~Q(path="")) | (~Q(file="") & Q(path="")),
                name="inferencemodel_one_source",
                violation_error_message="Give the model's file: upload it, or name its path, "
                "not both.",
            ),
            models.CheckConstraint(
                condition=Q(vram_mb__gt=0) | Q(ram_mb__gt=0),
                name="inferencemodel_runs_somewhere",
                violation_error_message="Give the memory it needs on a GPU, on a CPU, or both.",
            ),
            models.CheckConstraint(
                condition=Q(sha256__regex=r"^[0-9a-f]{64}$"), name="inferencemodel_sha256_hex"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class RequestState(models.TextChoices):
    REQUESTED = "requested"
    SERVED = "served"
    FAILED = "failed"


class InferenceRequest(models.Model):
    """One call of /v1/chat/completions or /v1/completions: a projection of its events
    (InferenceRequested, then InferenceServed or InferenceFailed), written with them."""

    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="inference_requests"
    )
    model = models.ForeignKey(InferenceModel, on_delete=models.PROTECT, related_name="requests")
    kind = models.CharField(max_length=16)  # "chat" or "completion"
    state = models.CharField(
        max_length=16, choices=RequestState.choices, default=RequestState.REQUESTED
    )
    prompt_bound = models.PositiveIntegerField()
    max_tokens = models.PositiveIntegerField()
    held_minor = models.PositiveBigIntegerField()
    book_version = models.PositiveIntegerField()
    node = models.ForeignKey(
        "nodes.Node", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    charged_minor = models.PositiveBigIntegerField(default=0)
    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["submitter", "-id"], name="infreq_submitter_recent")]

    def __str__(self) -> str:
        return f"inference request {self.pk} ({self.state})"
