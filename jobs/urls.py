from django.urls import path

from jobs import api

urlpatterns = [
    path("jobs/", api.JobListCreateApi.as_view(), name="jobs"),
    path("jobs/<int:job_id>", api.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel", api.JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<int:job_id>/logs", api.JobLogsApi.as_view(), name="job-logs"),
    path("jobs/<int:job_id>/timeline", api.JobTimelineApi.as_view(), name="job-timeline"),
    path(
        "artifacts/<int:artifact_id>/download",
        api.ArtifactDownloadApi.as_view(),
        name="artifact-download",
    ),
]

# Under /api/v1/agent/ (computepool.urls), the agent's routes before anything else: the claim and
# the completion first, as Django tries the patterns in order.
agent_urlpatterns = [
    path("claim", api.ClaimApi.as_view(), name="agent-claim"),
    path(
        "attempts/<int:attempt_id>/complete",
        api.CompleteApi.as_view(),
        name="attempt-complete",
    ),
    path(
        "attempts/<int:attempt_id>/progress",
        api.ProgressApi.as_view(),
        name="attempt-progress",
    ),
    path("attempts/<int:attempt_id>/log", api.LogApi.as_view(), name="attempt-log"),
    path(
        "attempts/<int:attempt_id>/artifacts",
        api.ArtifactApi.as_view(),
        name="attempt-artifacts",
    ),
    path("attempts/<int:attempt_id>/fail", api.FailApi.as_view(), name="attempt-fail"),
]
