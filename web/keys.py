"""A person's own API keys: list, create (the secret shown once), revoke. The rules are the
people app's (people.services); these views only show them."""

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views import View

from core.api.permissions import session_roles
from core.errors import DomainError
from people.models import ApiKey
from people.services import api_key_create, api_key_revoke
from web.forms import KeyForm


def _page(request: HttpRequest, form: KeyForm, *, secret: str | None = None) -> HttpResponse:
    keys = ApiKey.objects.filter(user=request.user).order_by("-created_at", "-pk")
    response = render(request, "web/keys.html", {"keys": keys, "form": form, "secret": secret})
    # The page that shows a secret must not be kept by the browser or a proxy.
    add_never_cache_headers(response)
    return response


class KeysPage(LoginRequiredMixin, View):
    http_method_names = ["get", "post", "head", "options"]

    def _form(self, request: HttpRequest, data=None) -> KeyForm:
        return KeyForm(data, roles=sorted(session_roles(request.user)))

    def get(self, request: HttpRequest) -> HttpResponse:
        return _page(request, self._form(request))

    def post(self, request: HttpRequest) -> HttpResponse:
        form = self._form(request, request.POST)
        if not form.is_valid():
            return _page(request, form)
        try:
            key, secret = api_key_create(
                user=request.user,
                role=form.cleaned_data["role"],
                name=form.cleaned_data["name"],
                actor=f"user:{request.user.pk}",
            )
        except DomainError as exc:
            form.add_error(None, str(exc))
            return _page(request, form)
        messages.success(request, f"Created the key “{key.name}” ({key.prefix}…).")
        return _page(request, self._form(request), secret=secret)


class KeyRevokePage(LoginRequiredMixin, View):
    http_method_names = ["post", "options"]

    def post(self, request: HttpRequest, key_id: int) -> HttpResponse:
        # Looked up with its owner: another person's key answers exactly like a missing one.
        key = get_object_or_404(ApiKey, pk=key_id, user=request.user)
        key = api_key_revoke(key=key, actor=f"user:{request.user.pk}")
        messages.success(request, f"Revoked the key “{key.name}” ({key.prefix}…).")
        return redirect("web:keys")
