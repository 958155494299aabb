from django.urls import path, re_path

from nodes import api, benchmark_api

urlpatterns = [
    path("nodes/", api.NodeListCreateApi.as_view(), name="nodes"),
    re_path(r"^nodes/(?P<node_id>[0-9]+)/?$", api.NodeDetailApi.as_view(), name="node"),
    path("nodes/<int:node_id>/retire", api.NodeRetireApi.as_view(), name="node-retire"),
    path("nodes/<int:node_id>/pause", api.NodePauseApi.as_view(), name="node-pause"),
    path("nodes/<int:node_id>/resume", api.NodeResumeApi.as_view(), name="node-resume"),
    path("nodes/<int:node_id>/history", api.NodeHistoryApi.as_view(), name="node-history"),
    path("agent/me", api.AgentMeApi.as_view(), name="agent-me"),
    path("agent/heartbeat", api.AgentHeartbeatApi.as_view(), name="agent-heartbeat"),
    path("agent/earnings", api.AgentEarningsApi.as_view(), name="agent-earnings"),
    path("agent/benchmark", benchmark_api.AgentBenchmarkApi.as_view(), name="agent-benchmark"),
    path(
        "agent/benchmark/<int:benchmark_id>",
        benchmark_api.AgentBenchmarkReportApi.as_view(),
        name="agent-benchmark-report",
    ),
]
