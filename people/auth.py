"""Bearer-key authentication: one indexed lookup per request.

Person keys (cpk_…) resolve here. Other kinds of key register a resolver for their prefix (the
nodes app registers agent keys, cpa_…), so this module imports no app above it.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from people.keys import PERSON_PREFIX, hash_key
from people.models import ApiKey

Resolver = Callable[[str], tuple[Any, Any] | None]
_RESOLVERS: dict[str, Resolver] = {}
# How stale a key's `last_used_at` may get: a key in steady use costs one UPDATE a minute,
# not one per request.
LAST_USED_GRAIN = timedelta(minutes=1)


def register_key_resolver(prefix: str, resolver: Resolver) -> None:
    _RESOLVERS[prefix] = resolver


def _resolve_person_key(key: str) -> tuple[Any, Any] | None:
    api_key = (
        ApiKey.objects.select_related("user")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if api_key is None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_GRAIN:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key.user, api_key


register_key_resolver(PERSON_PREFIX, _resolve_person_key)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <key>'.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        for prefix, resolver in _RESOLVERS.items():
            if key.startswith(prefix):
                resolved = resolver(key)
                if resolved is None:
                    break
                return resolved
        raise exceptions.AuthenticationFailed("Invalid or revoked API key.")

    def authenticate_header(self, request) -> str:
        return self.keyword
