"""Writes about people: roles, API keys and what they show the public, each with its audit
event."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from ledger.services import event_append
from people.keys import PERSON_PREFIX, display_prefix, generate_key, hash_key
from people.models import ApiKey, PublicProfile, Role
from people.roles import user_roles

User = get_user_model()


class RoleRequired(DomainError):
    code = "role_required"
    http_status = 403


def role_grant(*, user, role: str, actor: str = "system") -> None:
    if role not in Role.values:
        raise DomainError(f"unknown role {role!r}", fields={"role": [f"one of {Role.values}"]})
    with transaction.atomic():
        group, _ = Group.objects.get_or_create(name=role)
        if user.groups.filter(pk=group.pk).exists():
            return
        user.groups.add(group)
        event_append(
            stream=f"user:{user.pk}", type="RoleGranted", actor=actor, payload={"role": role}
        )
    user.__dict__.pop("_computepool_roles", None)


def user_create(
    *,
    username: str,
    roles: list[str],
    email: str = "",
    password: str | None = None,
    actor: str = "system",
):
    with transaction.atomic():
        user = User.objects.create_user(username=username, email=email, password=password)
        for role in roles:
            role_grant(user=user, role=role, actor=actor)
    return user


def api_key_create(*, user, role: str, name: str, actor: str | None = None) -> tuple[ApiKey, str]:
    """Issue a key acting as `role`. The plaintext is returned once and never stored."""
    if role not in user_roles(user):
        raise RoleRequired(f"{user} does not hold the role {role!r}", fields={"role": ["not held"]})
    plaintext = generate_key(PERSON_PREFIX)
    with transaction.atomic():
        key = ApiKey.objects.create(
            user=user,
            role=role,
            name=name[:100] or role,
            prefix=display_prefix(plaintext),
            key_hash=hash_key(plaintext),
        )
        event_append(
            stream=f"user:{user.pk}",
            type="ApiKeyIssued",
            actor=actor or f"user:{user.pk}",
            payload={"key_id": key.pk, "role": role, "name": key.name, "prefix": key.prefix},
        )
    return key, plaintext


def api_key_revoke(*, key: ApiKey, actor: str) -> ApiKey:
    with transaction.atomic():
        # Compare-and-set: a second revoke (or a race) changes nothing and writes no event.
        changed = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if changed:
            event_append(
                stream=f"user:{key.user_id}",
                type="ApiKeyRevoked",
                actor=actor,
                payload={"key_id": key.pk, "prefix": key.prefix},
            )
    key.refresh_from_db()
    return key


def public_name_set(
    *, user, show_name: bool, public_name: str, actor: str | None = None
) -> PublicProfile:
    """Show `public_name` on the public leaderboard, or stop showing it (anonymous again): the
    operator's choice, or an admin's hiding a name. Writes nothing when nothing changes."""
    name = " ".join(public_name.split())
    if show_name and not name:
        raise DomainError(
            "a name to show is needed", fields={"public_name": ["needed to show your name"]}
        )
    if len(name) > 40:
        raise DomainError(
            "a public name is 40 characters at most", fields={"public_name": ["40 at most"]}
        )
    with transaction.atomic():
        profile, _ = PublicProfile.objects.select_for_update().get_or_create(user=user)
        if (profile.show_name, profile.public_name) == (show_name, name):
            return profile
        profile.show_name, profile.public_name = show_name, name
        profile.updated_at = timezone.now()
        profile.save(update_fields=["show_name", "public_name", "updated_at"])
        event_append(
            stream=f"user:{user.pk}",
            type="PublicNameSet",
            actor=actor or f"user:{user.pk}",
            payload={"show_name": show_name, "public_name": name},
        )
    return profile
