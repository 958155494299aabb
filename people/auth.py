"""Bearer-key authentication: one indexed lookup per request.

Person keys (cpk_…) resolve here. Other kinds of key register a resolver for their prefix (the
nodes app registers agent keys, cpa_…), so this module imports no app above it.
"""

from collections.abc import Callable
from typing import Any

from rest_framework import authentication, exceptions

from people.keys import PERSON_PREFIX, hash_key
from people.models import ApiKey

Resolver = Callable[[str], tuple[Any, Any] | None]
_RESOLVERS: dict[str, Resolver] = {}


def register_key_resolver(prefix: str, resolver: Resolver) -> None:
    _RESOLVERS[prefix] = resolver


def _resolve_person_key(key: str) -> tuple[Any, Any] | None:
    api_key = (
        ApiKey.objects.select_related("user")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    return (api_key.user, api_key) if api_key else None


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
