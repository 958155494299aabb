"""Finance's pages: the cashout queue (approve, reject with a reason, mark paid), the exports
(make one, read its lines, download its CSV and its signed chain head), and a person's statement.

Every change calls the service the finance API calls (ledger.cashouts, ledger.exports), and
every read is the API's (ledger.exports.export_csv_chunks and export_head, ledger.statements),
so a page and the API never disagree.
"""

import json
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View

from core.errors import DomainError
from ledger.cashouts import cashout_approve, cashout_mark_paid, cashout_reject
from ledger.exports import cashout_export_create, export_csv_chunks, export_head
from ledger.models_cashouts import Cashout, CashoutExport, CashoutStatus
from ledger.statements import statement_lines, statement_summary
from web.roles import FinancePage

PER_PAGE = 50
STATEMENT_LINES = 500


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.pk}"


# --- The cashout queue -----------------------------------------------------------------------


def _status(request: HttpRequest) -> str:
    wanted = request.GET.get("status") or request.POST.get("status") or CashoutStatus.REQUESTED
    return wanted if wanted in CashoutStatus.values else CashoutStatus.REQUESTED


def _queue(status: str) -> str:
    return f"{reverse('web:finance_cashouts')}?status={status}"


class CashoutQueuePage(FinancePage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        status = _status(request)
        # Oldest first: the queue is worked in the order people asked.
        cashouts = Cashout.objects.filter(status=status).select_related("operator").order_by("id")
        page = Paginator(cashouts, PER_PAGE).get_page(request.GET.get("page"))
        return render(
            request,
            "web/finance/cashouts.html",
            {"page": page, "status": status, "statuses": CashoutStatus.values},
        )


class _CashoutAction(FinancePage, View):
    """POST only; the answer is the queue again, with what happened as a message."""

    http_method_names = ["post", "options"]
    done = ""

    def act(self, request: HttpRequest, cashout_id: int) -> Cashout:
        raise NotImplementedError

    def post(self, request: HttpRequest, cashout_id: int) -> HttpResponse:
        get_object_or_404(Cashout, pk=cashout_id)
        try:
            cashout = self.act(request, cashout_id)
        except DomainError as exc:
            messages.error(request, f"Cashout {cashout_id}: {exc}")
        else:
            messages.success(request, f"Cashout {cashout.pk} {self.done}.")
        return redirect(_queue(_status(request)))


class CashoutApprovePage(_CashoutAction):
    done = "approved"

    def act(self, request: HttpRequest, cashout_id: int) -> Cashout:
        return cashout_approve(cashout_id=cashout_id, actor=_actor(request))


class CashoutRejectPage(_CashoutAction):
    done = "rejected: its credits are back in the operator's earnings"

    def act(self, request: HttpRequest, cashout_id: int) -> Cashout:
        reason = request.POST.get("reason", "")[:2000]
        return cashout_reject(cashout_id=cashout_id, reason=reason, actor=_actor(request))


class CashoutPaidPage(_CashoutAction):
    done = "marked paid"

    def act(self, request: HttpRequest, cashout_id: int) -> Cashout:
        reference = request.POST.get("payout_reference", "")
        return cashout_mark_paid(
            cashout_id=cashout_id, payout_reference=reference, actor=_actor(request)
        )


# --- Exports ---------------------------------------------------------------------------------


class PeriodForm(forms.Form):
    """Whole UTC days, both ends included: [from 00:00, to + 1 day 00:00)."""

    start = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("start") and data.get("end") and data["start"] > data["end"]:
            raise forms.ValidationError("The period ends before it starts.")
        return data

    def period(self) -> tuple[datetime, datetime]:
        start, end = self.cleaned_data["start"], self.cleaned_data["end"]
        return _midnight(start), _midnight(end + timedelta(days=1))


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _last_30_days() -> dict[str, date]:
    today = timezone.now().astimezone(UTC).date()
    return {"start": today - timedelta(days=30), "end": today}


class ExportsPage(FinancePage, View):
    http_method_names = ["get", "post", "head", "options"]

    def _page(self, request: HttpRequest, form: PeriodForm) -> HttpResponse:
        exports = CashoutExport.objects.order_by("-id")
        page = Paginator(exports, PER_PAGE).get_page(request.GET.get("page"))
        return render(request, "web/finance/exports.html", {"page": page, "form": form})

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, PeriodForm(initial=_last_30_days()))

    def post(self, request: HttpRequest) -> HttpResponse:
        form = PeriodForm(request.POST)
        if not form.is_valid():
            return self._page(request, form)
        period_from, period_to = form.period()
        try:
            export = cashout_export_create(
                period_from=period_from, period_to=period_to, actor=_actor(request)
            )
        except DomainError as exc:
            form.add_error(None, str(exc))
            return self._page(request, form)
        messages.success(request, f"Export {export.pk}: {export.count} cashout(s).")
        return redirect("web:finance_export", export_id=export.pk)


class ExportPage(FinancePage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest, export_id: int) -> HttpResponse:
        export = get_object_or_404(CashoutExport, pk=export_id)
        lines = export.lines.order_by("position")
        page = Paginator(lines, PER_PAGE * 4).get_page(request.GET.get("page"))
        return render(
            request,
            "web/finance/export.html",
            {"export": export, "page": page, "head": export_head(export)},
        )


class ExportDownloadPage(FinancePage, View):
    """The export's CSV: the same bytes as the API's download (export_csv_chunks)."""

    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest, export_id: int) -> StreamingHttpResponse:
        export = get_object_or_404(CashoutExport, pk=export_id)
        response = StreamingHttpResponse(
            export_csv_chunks(export), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        response["X-Content-SHA256"] = export.sha256
        return response


class ExportHeadPage(FinancePage, View):
    """The signed chain head to keep with the CSV: the file `export_cashouts --head` writes,
    which `verify_ledger --against` reads."""

    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest, export_id: int) -> HttpResponse:
        export = get_object_or_404(CashoutExport, pk=export_id)
        body = json.dumps(export_head(export), indent=2, sort_keys=True) + "\n"
        response = HttpResponse(body, content_type="application/json")
        name = export.filename.removesuffix(".csv") + "-head.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


# --- Statements ------------------------------------------------------------------------------


class StatementForm(PeriodForm):
    username = forms.CharField(label="Person (username)", max_length=150)
    field_order = ["username", "start", "end"]

    def clean_username(self) -> Any:
        name = self.cleaned_data["username"].strip()
        person = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: name}).first()
        if person is None:
            raise forms.ValidationError("Nobody has that username.")
        return person


class StatementsPage(FinancePage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        asked = "username" in request.GET
        form = StatementForm(request.GET if asked else None, initial=_last_30_days())
        context: dict[str, Any] = {"form": form}
        if asked and form.is_valid():
            period_from, period_to = form.period()
            period = {
                "user_id": form.cleaned_data["username"].pk,
                "period_from": period_from,
                "period_to": period_to,
            }
            context["person"] = form.cleaned_data["username"]
            statement = statement_summary(**period)
            context["statement"] = statement
            context["totals"] = [
                (name.replace("_", " ").capitalize(), amount)
                for name, amount in statement.totals.items()
                if amount
            ]
            context["lines"] = list(statement_lines(**period, limit=STATEMENT_LINES))
            context["line_limit"] = STATEMENT_LINES
        return render(request, "web/finance/statements.html", context)
