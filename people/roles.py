from django.contrib.auth.models import Group

from people.models import Role


def user_roles(user) -> set[str]:
    if not user or not user.is_authenticated:
        return set()
    cached = getattr(user, "_computepool_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))
        if user.is_superuser:
            cached.add(Role.ADMIN)
        user._computepool_roles = cached
    return cached


def ensure_role_groups() -> None:
    for role in Role.values:
        Group.objects.get_or_create(name=role)
