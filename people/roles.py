from django.contrib.auth.models import Group

from core.api.permissions import session_roles
from people.models import Role

user_roles = session_roles


def ensure_role_groups() -> None:
    for role in Role.values:
        Group.objects.get_or_create(name=role)
