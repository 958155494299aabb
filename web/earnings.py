"""An operator's earnings and cashouts: what was earned (today, this month, ever, and a chart of
the last 30 days), the cashouts asked for, and asking for one.

The figures are read from the postings (ledger.earnings) and balances (ledger.selectors); a
cashout is asked for through ledger.cashouts.cashout_request, the service the API calls, so the
minimum, the balance check and the payout details' rules are its own.
"""

from dataclasses import dataclass
from decimal import Decimal

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from core.errors import DomainError
from ledger.cashouts import cashout_request
from ledger.earnings import EarnedDay, earned_by_day, earned_totals
from ledger.models_cashouts import Cashout
from ledger.pricing import NoRulesInForce, Rules, rules_at
from ledger.quotes import MINOR_PER_CREDIT, minor_to_paise_floor
from ledger.selectors import user_balances
from web.ratelimit import over_budget_page
from web.roles import OperatorPage

CHART_DAYS = 30
CHART_HEIGHT = 120
BAR_PITCH = 20  # a bar and its gap, in the chart's units: a wide, low chart on any screen
CASHOUTS_SHOWN = 100


@dataclass(frozen=True)
class Bar:
    day: EarnedDay
    x: int
    y: int
    height: int


def chart_bars(days: list[EarnedDay], *, height: int = CHART_HEIGHT) -> list[Bar]:
    """Bars for an inline SVG, scaled to the best day; a day with nothing has no height."""
    top = max((d.amount for d in days), default=0)
    bars = []
    for n, d in enumerate(days):
        tall = d.amount * height // top if top > 0 and d.amount > 0 else 0
        bars.append(Bar(day=d, x=n * BAR_PITCH, y=height - tall, height=tall))
    return bars


def min_cashout_minor(rules: Rules) -> int:
    """The price book's minimum cashout in credit minor units (rounded up, as the service
    checks the rupee figure)."""
    return -(-rules.min_cashout_paise * MINOR_PER_CREDIT // rules.paise_per_credit)


def _rules() -> Rules | None:
    try:
        return rules_at()
    except NoRulesInForce:
        return None


class EarningsPage(OperatorPage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        user_id = request.user.pk
        days = earned_by_day(user_id=user_id, days=CHART_DAYS)
        rules = _rules()
        balances = user_balances(user_id=user_id)
        context = {
            "totals": earned_totals(user_id=user_id),
            "bars": chart_bars(days),
            "chart_height": CHART_HEIGHT,
            "chart_width": CHART_DAYS * BAR_PITCH,
            "balances": balances,
            "earnings_paise": minor_to_paise_floor(
                balances.earnings, paise_per_credit=rules.paise_per_credit
            )
            if rules
            else None,
            "cashouts": Cashout.objects.filter(operator_id=user_id).order_by("-id")[
                :CASHOUTS_SHOWN
            ],
        }
        return render(request, "web/operator/earnings.html", context)


class CashoutForm(forms.Form):
    amount = forms.DecimalField(
        label="Amount (credits)", min_value=Decimal("0.01"), decimal_places=2, max_digits=15
    )
    method = forms.ChoiceField(
        choices=[("upi", "UPI"), ("bank", "Bank account")], widget=forms.RadioSelect, initial="upi"
    )
    vpa = forms.CharField(label="UPI id", required=False, max_length=300, help_text="name@bank")
    account_name = forms.CharField(label="Account holder", required=False, max_length=100)
    account_number = forms.CharField(label="Account number", required=False, max_length=18)
    ifsc = forms.CharField(label="IFSC", required=False, max_length=11)

    def amount_minor(self) -> int:
        return int(self.cleaned_data["amount"] * MINOR_PER_CREDIT)

    def payout_details(self) -> dict[str, str]:
        data = self.cleaned_data
        if data["method"] == "upi":
            return {"method": "upi", "vpa": data["vpa"]}
        return {
            "method": "bank",
            "account_name": data["account_name"],
            "account_number": data["account_number"],
            "ifsc": data["ifsc"],
        }

    def add_domain_error(self, exc: DomainError) -> None:
        """The service's refusal on the form: a payout detail's on its field
        (`payout_details.vpa` → vpa), anything else (the minimum, the balance) above the form,
        in the service's own words (its amount errors name minor units, not for people)."""
        for name, problems in exc.fields.items():
            field = name.removeprefix("payout_details.")
            if name.startswith("payout_details.") and field in self.fields and field != "method":
                self.add_error(field, "; ".join(problems))
                return
        self.add_error(None, str(exc))


class CashoutPage(OperatorPage, View):
    http_method_names = ["get", "post", "head", "options"]

    def _page(self, request: HttpRequest, form: CashoutForm) -> HttpResponse:
        rules = _rules()
        context = {
            "form": form,
            "available": user_balances(user_id=request.user.pk).earnings,
            "minimum_minor": min_cashout_minor(rules) if rules else None,
            "rules": rules,
        }
        return render(request, "web/operator/cashout.html", context)

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, CashoutForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        if refused := over_budget_page(request, "cashout"):
            return refused
        form = CashoutForm(request.POST)
        if not form.is_valid():
            return self._page(request, form)
        try:
            cashout = cashout_request(
                operator_id=request.user.pk,
                amount=form.amount_minor(),
                payout_details=form.payout_details(),
                actor=f"user:{request.user.pk}",
            )
        except NoRulesInForce:
            form.add_error(None, "Cashouts are closed: no price book is in force.")
            return self._page(request, form)
        except DomainError as exc:
            form.add_domain_error(exc)
            return self._page(request, form)
        messages.success(request, f"Cashout {cashout.pk} asked for: finance will review it.")
        return redirect("web:earnings")
