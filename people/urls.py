from django.urls import path

from people import api

urlpatterns = [
    path("me", api.MeApi.as_view(), name="me"),
    path("keys/", api.ApiKeyListCreateApi.as_view(), name="keys"),
    path("keys/<int:key_id>/revoke", api.ApiKeyRevokeApi.as_view(), name="key-revoke"),
]
