from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.api.not_found import api_not_found
from core.health import healthz
from core.metrics import metrics

api_v1 = [
    path("", include("people.urls")),
    path("", include("nodes.urls")),
    path("", include("jobs.urls")),
    path("", include("webhooks.urls")),
    path("", include("ledger.urls")),
    path("", include("inference.agent_urls")),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # Last: any other path under the API (a mistyped route, /jobs/abc, /jobs/-1) is the API's
    # JSON 404, not Django's page.
    path("<path:unknown>", api_not_found, name="api-not-found"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    # OpenAI-compatible: clients are given the base URL <hub>/v1.
    path("v1/", include("inference.urls")),
    path("api-auth/", include("rest_framework.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    # The pages for people (web/): the landing page at /, accounts, keys.
    path("", include("web.urls")),
]

admin.site.site_header = "ComputePool"
admin.site.site_title = "ComputePool admin"
