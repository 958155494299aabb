"""Permissions live in computepool.api.permissions (usable by every app); kept importable here."""

from computepool.api.permissions import (
    IsFinance,
    IsOperator,
    IsPerson,
    IsSubmitter,
    acting_roles,
    has_role,
)

__all__ = ["IsFinance", "IsOperator", "IsPerson", "IsSubmitter", "acting_roles", "has_role"]
