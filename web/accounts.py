"""Accounts: sign up, log in and out, reset a password. Django's auth views, with our templates,
budgets on every form that takes a password or sends mail, and the people app's services."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.generic import FormView

from people.services import user_create
from web.forms import SignupForm
from web.ratelimit import RateLimitedPost

FORM_METHODS = ["get", "post", "head", "options"]


class SignupPage(RateLimitedPost, FormView):
    template_name = "web/signup.html"
    form_class = SignupForm
    http_method_names = FORM_METHODS
    rate_action = "signup"

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.WEB_SIGNUP_OPEN:
            return render(request, "web/signup_closed.html", status=403)
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form: SignupForm) -> HttpResponse:
        data = form.cleaned_data
        try:
            user = user_create(
                username=data["username"],
                email=data["email"],
                password=data["password1"],
                roles=[data["role"]],
                actor="signup",
            )
        except IntegrityError:  # the same name, taken between the form's check and now
            form.add_error("username", "A user with that username already exists.")
            return self.form_invalid(form)
        login(self.request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(self.request, f"Welcome, {user.get_username()}: your account is open.")
        return redirect("web:home")


class LoginPage(RateLimitedPost, auth.LoginView):
    template_name = "web/login.html"
    http_method_names = FORM_METHODS
    rate_action = "login"
    account_field = "username"


class LogoutPage(auth.LogoutView):
    """POST only (Django's own rule): a link or an image cannot log anyone out."""


class PasswordResetPage(RateLimitedPost, auth.PasswordResetView):
    template_name = "web/password_reset.html"
    email_template_name = "web/email/password_reset.txt"
    subject_template_name = "web/email/password_reset_subject.txt"
    success_url = reverse_lazy("web:password_reset_sent")
    http_method_names = FORM_METHODS
    rate_action = "password_reset"
    account_field = "email"


class PasswordResetSentPage(auth.PasswordResetDoneView):
    template_name = "web/password_reset_sent.html"


class PasswordResetConfirmPage(auth.PasswordResetConfirmView):
    template_name = "web/password_reset_confirm.html"
    success_url = reverse_lazy("web:password_reset_complete")
    http_method_names = FORM_METHODS


class PasswordResetCompletePage(auth.PasswordResetCompleteView):
    template_name = "web/password_reset_complete.html"
