from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.health import healthz
from core.metrics import metrics
from jobs.urls import agent_urlpatterns as jobs_agent
from nodes.urls import agent_urlpatterns as nodes_agent

# Django tries patterns in order, and the agents' requests are nearly all of the hub's: their
# routes come first, under one prefix, so that a heartbeat, a claim or a completion is matched
# after a few patterns instead of after every route of the API and the admin.
agent = nodes_agent + jobs_agent

api_v1 = [
    path("agent/", include(agent)),
    path("", include("people.urls")),
    path("", include("nodes.urls")),
    path("", include("jobs.urls")),
    path("", include("ledger.urls")),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api-auth/", include("rest_framework.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]

admin.site.site_header = "ComputePool"
admin.site.site_title = "ComputePool admin"
