"""The job form: what the API's job body takes, as fields a person fills in.

The form only gathers; the API's own serializer (jobs.serializers.JobIn) validates, and its
errors land on the fields that caused them, so the page and the API never disagree on a rule.
"""

import base64
import shlex
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from jobs.models import JobKind
from jobs.serializers import JobIn
from ledger.quotes import parse_credits


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None) -> list[UploadedFile]:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)] if data else []


class CreditsField(forms.CharField):
    """Credits with at most two decimals, as minor units (ledger.quotes.parse_credits)."""

    def to_python(self, value: Any) -> int | None:
        text = super().to_python(value)
        if not text:
            return None
        try:
            return parse_credits(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


def _blank_int(**kwargs) -> forms.IntegerField:
    return forms.IntegerField(required=False, **kwargs)


class JobForm(forms.Form):
    name = forms.CharField(required=False, max_length=200)
    kind = forms.ChoiceField(
        choices=JobKind.choices, initial=JobKind.SCRIPT, widget=forms.RadioSelect
    )
    script = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        help_text="A script job: runs with its inputs under $COMPUTEPOOL_IN; files written to "
        "$COMPUTEPOOL_OUT come back. Print <code>CP_PROGRESS 50 halfway</code> to report progress.",
    )
    interpreter = forms.ChoiceField(choices=[("sh", "sh"), ("python", "python")], initial="sh")
    image = forms.CharField(required=False, help_text="A container job's image.")
    command = forms.CharField(required=False, help_text="A container job's command, as a shell "
                              "would split it.")  # fmt: skip
    inputs = MultipleFileField(required=False, help_text="Files the job reads (1 MiB in all).")
    slices = forms.IntegerField(initial=1, min_value=1)
    cpu_cores = forms.IntegerField(initial=1, label="CPU cores")
    ram_mb = forms.IntegerField(initial=512, label="RAM (MB)")
    disk_mb = forms.IntegerField(initial=256, label="Disk (MB)")
    gpu_count = forms.IntegerField(initial=0, label="GPUs")
    min_vram_mb = forms.IntegerField(initial=0, label="Minimum VRAM (MB)")
    gpu_tiers = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="GPU tiers",
        help_text="None ticked: any tier.",
    )
    region = forms.CharField(required=False, max_length=2, help_text="ISO-2; blank: anywhere.")
    timeout_s = forms.IntegerField(initial=600, label="Timeout (s)")
    max_attempts = forms.IntegerField(initial=3)
    priority = forms.IntegerField(initial=0)
    price_ceiling = CreditsField(
        initial="5.00",
        label="Price ceiling (credits/s)",
        help_text="The most you pay per second per task; a node asking more is not used.",
    )
    retention_days = _blank_int(
        label="Keep outputs (days)", help_text="After the job ends. Blank: the hub's default."
    )
    replicas = _blank_int(label="Verify: replicas", help_text="Blank: not verified.")
    quorum = _blank_int(label="Verify: quorum")

    def __init__(self, *args, tiers: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_tiers"].choices = [(t, t) for t in tiers]
        self.job_data: dict[str, Any] | None = None

    def api_body(self) -> dict[str, Any]:
        """The body the API would be sent (before JobIn validates it)."""
        d = self.cleaned_data
        body: dict[str, Any] = {
            "name": d["name"],
            "kind": d["kind"],
            "slices": d["slices"],
            "timeout_s": d["timeout_s"],
            "max_attempts": d["max_attempts"],
            "priority": d["priority"],
            "price_ceiling": d["price_ceiling"],
            "requirements": {
                "cpu_cores": d["cpu_cores"],
                "ram_mb": d["ram_mb"],
                "disk_mb": d["disk_mb"],
                "gpu_count": d["gpu_count"],
                "min_vram_mb": d["min_vram_mb"],
                "gpu_tiers": d["gpu_tiers"],
                "region": d["region"],
            },
            "inputs": {f.name: base64.b64encode(f.read()).decode() for f in d.get("inputs") or []},
        }
        if d["kind"] == JobKind.SCRIPT:
            body["interpreter"] = d["interpreter"]
            if d["script"]:  # left out when blank: JobIn then says what a script job needs
                body["script"] = d["script"]
        else:
            body |= {"image": d["image"], "command": shlex.split(d["command"] or "")}
        if d["retention_days"] is not None:
            body["retention_days"] = d["retention_days"]
        if d["replicas"] is not None or d["quorum"] is not None:
            body["verification"] = {"replicas": d["replicas"], "quorum": d["quorum"]}
        return body

    def clean_script(self) -> str:
        # A browser sends a textarea's lines ending in CR LF (the HTML form encoding); a shell
        # would read each CR as part of the line.
        return self.cleaned_data["script"].replace("\r\n", "\n")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if self.cleaned_data["kind"] == JobKind.CONTAINER:
            try:
                shlex.split(cleaned.get("command") or "")
            except ValueError as exc:
                self.add_error("command", str(exc))
                return cleaned
        serializer = JobIn(data=self.api_body())
        if serializer.is_valid():
            self.job_data = serializer.validated_data
        else:
            self._add_api_errors(serializer.errors)
        return cleaned

    def _add_api_errors(self, errors: dict, within: str = "") -> None:
        """JobIn's errors on this form's fields; requirements and verification are nested."""
        for key, found in errors.items():
            if isinstance(found, dict):
                self._add_api_errors(found, within=key)
                continue
            field = key if key in self.fields else None
            for message in found:
                where = within if key == "non_field_errors" else key
                self.add_error(field, str(message) if field else f"{where}: {message}")
