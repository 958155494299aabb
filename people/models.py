"""Roles and API keys.

A role is a Django group (operator, submitter, finance, admin), so admins manage people in the
admin they already know. An API key belongs to one user and acts as exactly one of that user's
roles: an operator's key cannot submit jobs, and no person's key can act as a node (agent keys
live on the node, see nodes.models).
"""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    OPERATOR = "operator"
    SUBMITTER = "submitter"
    FINANCE = "finance"
    ADMIN = "admin"


class ApiKey(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    name = models.CharField(max_length=100)
    # The first characters of the key, shown in lists so a person can tell keys apart.
    prefix = models.CharField(max_length=16)
    # sha256 of the whole key. Keys are 256-bit random, so a fast hash is enough (no password
    # stretching), and authentication stays one indexed lookup.
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # When the key last authenticated a request, to the minute (people.auth): what its owner
    # needs to tell a forgotten key from one in use, at one write per key per minute.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "role"], name="apikey_user_role")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.role}, {self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def throttle_id(self) -> str:
        return f"k{self.pk}"


class PublicProfile(models.Model):
    """What a person chose to show the public: today, their name on the network page's
    leaderboard. Off unless they turn it on (no row is off too); the name shown is one they
    type, never their username, which is half of a login."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="public_profile",
    )
    show_name = models.BooleanField(default=False)
    public_name = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user}: {self.public_name if self.show_name else '(anonymous)'}"
