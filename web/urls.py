from django.urls import path

from web import accounts, credits, home, job_new, job_pages, keys

app_name = "web"

urlpatterns = [
    path("", home.LandingPage.as_view(), name="landing"),
    path("signup/", accounts.SignupPage.as_view(), name="signup"),
    path("login/", accounts.LoginPage.as_view(), name="login"),
    path("logout/", accounts.LogoutPage.as_view(), name="logout"),
    path("password-reset/", accounts.PasswordResetPage.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        accounts.PasswordResetSentPage.as_view(),
        name="password_reset_sent",
    ),
    path(
        "reset/<uidb64>/<token>/",
        accounts.PasswordResetConfirmPage.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/", accounts.PasswordResetCompletePage.as_view(), name="password_reset_complete"
    ),
    path("account/", home.HomePage.as_view(), name="home"),
    path("account/keys/", keys.KeysPage.as_view(), name="keys"),
    path("account/keys/<int:key_id>/revoke/", keys.KeyRevokePage.as_view(), name="key_revoke"),
    # a submitter's pages
    path("jobs/", job_pages.JobsPage.as_view(), name="jobs"),
    path("jobs/new/", job_new.NewJobPage.as_view(), name="job_new"),
    path("jobs/new/quote/", job_new.QuotePage.as_view(), name="job_quote"),
    path("jobs/<int:job_id>/", job_pages.JobPage.as_view(), name="job"),
    path("jobs/<int:job_id>/live/", job_pages.JobLivePage.as_view(), name="job_live"),
    path("jobs/<int:job_id>/cancel/", job_pages.JobCancelPage.as_view(), name="job_cancel"),
    path("jobs/<int:job_id>/outputs.zip", job_pages.JobZipPage.as_view(), name="job_zip"),
    path("credits/", credits.CreditsPage.as_view(), name="credits"),
]
