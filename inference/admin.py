from django import forms
from django.contrib import admin

from core.admin import NoEditAdmin
from inference.catalog import ModelFileRejected, model_fingerprint
from inference.models import InferenceModel, InferenceRequest, sha256_validator
from ledger.display import credits, money_column


class InferenceModelForm(forms.ModelForm):
    expected_sha256 = forms.CharField(
        required=False,
        validators=[sha256_validator],
        help_text="Optional: the sha256 the file must have (the hub computes it either way).",
    )

    class Meta:
        model = InferenceModel
        fields = [
            "name", "file", "path", "quantization", "context_length", "vram_mb", "ram_mb",
            "enabled",
        ]  # fmt: skip

    def _post_clean(self) -> None:
        super()._post_clean()
        if self.errors:  # the model's own checks first (one source for the file, among them)
            return
        try:
            model_fingerprint(self.instance, expected_sha256=self.cleaned_data["expected_sha256"])
        except ModelFileRejected as exc:
            self.add_error(None, str(exc))


@admin.register(InferenceModel)
class InferenceModelAdmin(admin.ModelAdmin):
    form = InferenceModelForm
    list_display = ["name", "quantization", "context_length", "vram_mb", "ram_mb", "size_bytes",
                    "enabled"]  # fmt: skip
    list_filter = ["enabled", "quantization"]
    search_fields = ["name", "sha256"]
    readonly_fields = ["sha256", "size_bytes", "created_at"]


@admin.register(InferenceRequest)
class InferenceRequestAdmin(NoEditAdmin):
    """Requests change only through the relay (each change is an event); the admin shows them."""

    list_display = (
        "id", "submitter", "model", "kind", "state", "node", "prompt_tokens",
        "completion_tokens", money_column("charged_minor", credits, "charged"), "ttft_ms",
        "created_at",
    )  # fmt: skip
    list_filter = ("state", "kind", "model")
    list_select_related = ("submitter", "model", "node")
    search_fields = ("=id", "submitter__username")
