"""The menu of the pages, by role: one list, which the base layout reads.

Pages for each role add their entry here; an entry shows to a user holding any of its roles
(a browser session acts as every role its user holds, core.api.permissions.session_roles).
"""

from dataclasses import dataclass

from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from core.api.permissions import ROLES, session_roles


@dataclass(frozen=True)
class Entry:
    label: str
    url_name: str
    roles: frozenset[str]


EVERYONE = frozenset(ROLES)
MENU = (
    Entry("Account", "web:home", EVERYONE),
    Entry("API keys", "web:keys", EVERYONE),
    Entry("Nodes", "web:nodes", frozenset({"operator"})),
    Entry("Earnings", "web:earnings", frozenset({"operator"})),
    Entry("Cashouts", "web:finance_cashouts", frozenset({"finance", "admin"})),
    Entry("Exports", "web:finance_exports", frozenset({"finance", "admin"})),
    Entry("Statements", "web:finance_statements", frozenset({"finance", "admin"})),
    Entry("Admin", "admin:index", frozenset({"admin"})),
)


def menu_for(request: HttpRequest) -> list[dict[str, object]]:
    roles = session_roles(request.user)
    entries = []
    for entry in MENU:
        if entry.roles & roles:
            url = reverse(entry.url_name)
            entries.append({"label": entry.label, "url": url, "current": request.path == url})
    return entries


def navigation(request: HttpRequest) -> dict[str, object]:
    """Context processor. Lazy: the admin's and the API's pages render with it too, and should
    not pay for a roles query they never show."""
    return {
        "nav": SimpleLazyObject(lambda: menu_for(request)),
        "nav_roles": SimpleLazyObject(lambda: sorted(session_roles(request.user))),
    }
