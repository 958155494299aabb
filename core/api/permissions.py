"""Who may call what. A key acts as its one role; a browser session acts as the user's roles.

Duck-typed on purpose (a credential with a `role`, a user with groups) so every app, the
ledger included, can use these without importing the app that defines keys.
"""

from rest_framework.permissions import BasePermission

ROLES = ("operator", "submitter", "finance", "admin")


def session_roles(user) -> set[str]:
    if not user or not user.is_authenticated:
        return set()
    cached = getattr(user, "_computepool_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if user.is_superuser:
            cached.add("admin")
        user._computepool_roles = cached
    return cached


def acting_roles(request) -> set[str]:
    auth = request.auth
    role = getattr(auth, "role", None)
    if isinstance(role, str):
        return {role}
    if auth is None and request.user and request.user.is_authenticated:
        return session_roles(request.user)  # a session login (browsable API, admin)
    return set()  # e.g. an agent key: it acts only as its node


def has_role(*roles: str) -> type[BasePermission]:
    class HasRole(BasePermission):
        message = f"This needs the {' or '.join(roles)} role."

        def has_permission(self, request, view) -> bool:
            return bool(acting_roles(request) & set(roles))

    HasRole.__name__ = f"HasRole_{'_'.join(roles)}"
    return HasRole


IsOperator = has_role("operator")
IsSubmitter = has_role("submitter")
IsFinance = has_role("finance", "admin")
IsPerson = has_role(*ROLES)
