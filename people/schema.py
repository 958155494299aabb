"""Describes bearer-key authentication in the OpenAPI schema (imported from PeopleConfig.ready)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "people.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A person's key (cpk_…) acting as one role, or a node's agent key "
            "(cpa_…).",
        }
