"""Budgets for the pages that take a password or send mail (log in, sign up, password reset),
for a signed-in person's lasting writes (an enrolment key, a cashout request) and for the
public network page's views.

Counted as the API counts its per-key budgets (core.api.throttling.over_budget), per client
address and, where a form names an account (log in, password reset), per that account too: many
addresses against one account get no more tries than one address does.
"""

import hashlib

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.throttling import BaseThrottle

from core.api.throttling import over_budget


def client_address(request: HttpRequest) -> str:
    """The caller's address as the API's throttles name it."""
    return BaseThrottle().get_ident(request)


def spend(request: HttpRequest, action: str, *, account: str | None = None) -> float:
    """Count one attempt at `action`; the seconds to wait when a budget is spent, else 0."""
    count, seconds = getattr(settings, f"WEB_{action.upper()}_RATE")
    subjects = [f"ip:{client_address(request)}"]
    if account:
        # Hashed: a key of bounded length and alphabet whatever the form was sent.
        subjects.append("account:" + hashlib.sha256(account.lower().encode()).hexdigest())
    waits = [
        over_budget(f"web_{action}:{subject}", num_requests=count, duration=seconds)
        for subject in subjects
    ]
    return max(waits)


def too_many(request: HttpRequest, wait: float) -> HttpResponse:
    seconds = max(1, int(wait + 0.999))
    response = render(request, "web/rate_limited.html", {"seconds": seconds}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def over_budget_page(request: HttpRequest, action: str) -> HttpResponse | None:
    """For a signed-in person's write: spend one of WEB_<action>_RATE, per address and per
    account; the 429 page once a budget is spent, else None."""
    wait = spend(request, action, account=request.user.get_username())
    return too_many(request, wait) if wait else None


class RateLimitedPost:
    """For a form view: each POST spends the budget WEB_<action>_RATE before the form is read."""

    rate_action: str
    account_field: str | None = None

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        account = request.POST.get(self.account_field, "") if self.account_field else None
        wait = spend(request, self.rate_action, account=account)
        if wait:
            return too_many(request, wait)
        return super().post(request, *args, **kwargs)
