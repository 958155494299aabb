"""Submitting a job from the page, with what it would cost shown first.

The rules are the API's: JobIn validates (web.job_form), jobs.submission.job_submit submits,
and the quote is ledger.quotes.job_quote at each allowed tier's spot price, as GET
/api/v1/quote computes it.
"""

from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from core.errors import DomainError
from jobs.billing import known_tiers
from jobs.serializers import MAX_SLICES, MAX_TIMEOUT_S
from jobs.submission import job_submit
from ledger import pricing, quotes
from web.job_form import CreditsField, JobForm
from web.ratelimit import over_budget_page
from web.roles import SubmitterPage


def _form(data=None, files=None) -> JobForm:
    return JobForm(data, files, tiers=sorted(known_tiers()))


class NewJobPage(SubmitterPage, View):
    http_method_names = ["get", "post", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        return render(request, "web/jobs/new.html", {"form": _form()})

    def post(self, request: HttpRequest) -> HttpResponse:
        if refused := over_budget_page(request, "job_submit"):
            return refused
        form = _form(request.POST, request.FILES)
        if form.is_valid():
            try:
                submitted = job_submit(submitter_id=request.user.pk, data=form.job_data)
            except DomainError as exc:  # not enough credits for the hold, among others
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Submitted job {submitted.job.pk}.")
                return redirect("web:job", job_id=submitted.job.pk)
        return render(request, "web/jobs/new.html", {"form": form})


class QuoteForm(forms.Form):
    """The job form's fields that decide its price, read from the page's query."""

    price_ceiling = CreditsField()
    timeout_s = forms.IntegerField(min_value=1, max_value=MAX_TIMEOUT_S)
    slices = forms.IntegerField(min_value=1, max_value=MAX_SLICES)
    replicas = forms.IntegerField(required=False, min_value=1, max_value=16)
    gpu_tiers = forms.MultipleChoiceField(required=False)
    region = forms.CharField(required=False, max_length=2)

    def __init__(self, *args, tiers: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_tiers"].choices = [(t, t) for t in tiers]


@dataclass(frozen=True)
class TierQuote:
    tier: str
    quote: quotes.JobQuote


class QuotePage(SubmitterPage, View):
    """What the job in the form would cost now: a fragment the form's script fetches as the
    fields change (and a page of its own without a script)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        all_tiers = sorted(known_tiers())
        form = QuoteForm(request.GET, tiers=all_tiers)
        context: dict[str, object] = {"form": form}
        if form.is_valid():
            d = form.cleaned_data
            try:
                rules = pricing.rules_at()
                region = pricing.region_of(d["region"])
                context["rows"] = [
                    TierQuote(
                        tier,
                        quotes.job_quote(
                            ceiling_per_s_minor=d["price_ceiling"],
                            timeout_s=d["timeout_s"],
                            slices=d["slices"],
                            replicas=d["replicas"] or 1,
                            spot_per_s_minor=pricing.spot_price_get(
                                region=region, tier=tier, rules=rules
                            ),
                        ),
                    )
                    for tier in (d["gpu_tiers"] or sorted(rules.tiers))
                ]
            except DomainError as exc:  # no price book, an unknown region or tier
                context["problem"] = str(exc)
        response = render(request, "web/jobs/_quote.html", context)
        response["Cache-Control"] = "no-store"
        return response
