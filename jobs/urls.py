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
    path("agent/claim", api.ClaimApi.as_view(), name="agent-claim"),
    path(
        "agent/attempts/<int:attempt_id>/progress",
        api.ProgressApi.as_view(),
        name="attempt-progress",
    ),
    path("agent/attempts/<int:attempt_id>/log", api.LogApi.as_view(), name="attempt-log"),
    path(
        "agent/attempts/<int:attempt_id>/artifacts",
        api.ArtifactApi.as_view(),
        name="attempt-artifacts",
    ),
    path(
        "agent/attempts/<int:attempt_id>/complete",
        api.CompleteApi.as_view(),
        name="attempt-complete",
    ),
    path("agent/attempts/<int:attempt_id>/fail", api.FailApi.as_view(), name="attempt-fail"),
    path(
        "agent/attempts/<int:attempt_id>/hand-back",
        api.HandBackApi.as_view(),
        name="attempt-hand-back",
    ),
]
