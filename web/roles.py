"""The role gate of the pages: a stranger is sent to log in, a person without the role gets 403.

The roles are the API's (core.api.permissions): a session acts as every role of its user, so
the same person may be an operator here and finance there, as with their keys.
"""

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase

from core.api.permissions import session_roles

OPERATOR = frozenset({"operator"})
FINANCE = frozenset({"finance", "admin"})  # as the API's IsFinance


class RoleRequiredMixin(LoginRequiredMixin):
    roles: frozenset[str] = frozenset()

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not session_roles(request.user) & self.roles:
            raise PermissionDenied(f"This page needs the {' or '.join(sorted(self.roles))} role.")
        return super().dispatch(request, *args, **kwargs)


class OperatorPage(RoleRequiredMixin):
    roles = OPERATOR


class FinancePage(RoleRequiredMixin):
    roles = FINANCE
