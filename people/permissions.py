"""Who may call what. A key acts as its one role; a browser session acts as the user's roles."""

from rest_framework.permissions import BasePermission

from people.models import ApiKey, Role
from people.roles import user_roles


def acting_roles(request) -> set[str]:
    auth = request.auth
    if isinstance(auth, ApiKey):
        return {auth.role}
    if auth is None and request.user and request.user.is_authenticated:
        return user_roles(request.user)  # a session login (browsable API, admin)
    return set()  # e.g. an agent key: it acts only as its node


def has_role(*roles: str) -> type[BasePermission]:
    class HasRole(BasePermission):
        message = f"This needs the {' or '.join(roles)} role."

        def has_permission(self, request, view) -> bool:
            return bool(acting_roles(request) & set(roles))

    HasRole.__name__ = f"HasRole_{'_'.join(roles)}"
    return HasRole


IsOperator = has_role(Role.OPERATOR)
IsSubmitter = has_role(Role.SUBMITTER)
IsFinance = has_role(Role.FINANCE, Role.ADMIN)
IsPerson = has_role(*Role.values)
