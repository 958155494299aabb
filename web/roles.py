"""Pages for one role: log-in first, then the role, as the API's role permissions gate it."""

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from core.api.permissions import session_roles


class RoleRequired(LoginRequiredMixin):
    """A stranger is sent to log in; a signed-in person without the role gets 403."""

    role: str

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.user.is_authenticated and self.role not in session_roles(request.user):
            raise PermissionDenied(f"This page needs the {self.role} role.")
        return super().dispatch(request, *args, **kwargs)


class SubmitterRequired(RoleRequired):
    role = "submitter"
