from django.urls import path

from inference import api

urlpatterns = [
    path("models", api.ModelsApi.as_view(), name="v1-models"),
]
