"""An operator's choice to show a name on the network page's leaderboard (off by default).

The form lives on the account page; the rule is people.services.public_name_set.
"""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views import View

from core.errors import DomainError
from people.services import public_name_set
from web.ratelimit import over_budget_page
from web.roles import OperatorPage


class PublicNameForm(forms.Form):
    show_name = forms.BooleanField(
        label="Show my name on the public leaderboard", required=False, initial=False
    )
    public_name = forms.CharField(
        label="Name to show",
        required=False,
        max_length=40,
        help_text="Any name you like, 40 characters at most; never your username.",
    )


class PublicNamePage(OperatorPage, View):
    http_method_names = ["post", "options"]

    def post(self, request: HttpRequest) -> HttpResponse:
        if refused := over_budget_page(request, "public_name"):
            return refused
        form = PublicNameForm(request.POST)
        if not form.is_valid():
            for problems in form.errors.values():
                messages.error(request, " ".join(problems))
            return redirect("web:home")
        try:
            profile = public_name_set(
                user=request.user,
                show_name=form.cleaned_data["show_name"],
                public_name=form.cleaned_data["public_name"],
            )
        except DomainError as exc:
            messages.error(request, f"Not saved: {exc}.")
            return redirect("web:home")
        if profile.show_name:
            messages.success(request, f"The leaderboard shows you as {profile.public_name}.")
        else:
            messages.success(request, "The leaderboard shows you as an anonymous operator.")
        return redirect("web:home")
