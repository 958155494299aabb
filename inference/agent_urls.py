from django.urls import path

from inference import api

urlpatterns = [
    # A model's name may hold "/" (org/name): the rest of the path is the name.
    path("agent/models/<path:name>", api.AgentModelFileApi.as_view(), name="agent-model-file"),
]
