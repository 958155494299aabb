from django.urls import path

from inference import agent_relay, api

urlpatterns = [
    # A model's name may hold "/" (org/name): the rest of the path is the name.
    path("agent/models/<path:name>", api.AgentModelFileApi.as_view(), name="agent-model-file"),
    path("agent/inference/poll", agent_relay.Poll.as_view(), name="agent-inference-poll"),
    path("agent/inference/push", agent_relay.Push.as_view(), name="agent-inference-push"),
]
