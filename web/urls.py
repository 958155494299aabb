from django.urls import path

from web import (
    accounts,
    credits,
    earnings,
    finance,
    home,
    job_new,
    job_pages,
    keys,
    network,
    operator,
    public_name,
)

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
    path("network/", network.NetworkPage.as_view(), name="network"),
    path("account/", home.HomePage.as_view(), name="home"),
    path("account/public-name/", public_name.PublicNamePage.as_view(), name="public_name"),
    path("account/keys/", keys.KeysPage.as_view(), name="keys"),
    path("account/keys/<int:key_id>/revoke/", keys.KeyRevokePage.as_view(), name="key_revoke"),
    # an operator's nodes and earnings
    path("nodes/", operator.NodesPage.as_view(), name="nodes"),
    path("nodes/add/", operator.AddMachinePage.as_view(), name="add_machine"),
    path("nodes/<int:node_id>/", operator.NodePage.as_view(), name="node"),
    path(
        "nodes/<int:node_id>/price-floor/",
        operator.NodePriceFloorPage.as_view(),
        name="node_price_floor",
    ),
    path("nodes/<int:node_id>/retire/", operator.NodeRetirePage.as_view(), name="node_retire"),
    path("nodes/<int:node_id>/pause/", operator.NodePausePage.as_view(), name="node_pause"),
    path("nodes/<int:node_id>/resume/", operator.NodeResumePage.as_view(), name="node_resume"),
    path("earnings/", earnings.EarningsPage.as_view(), name="earnings"),
    path("earnings/cashout/", earnings.CashoutPage.as_view(), name="cashout"),
    # finance
    path("finance/cashouts/", finance.CashoutQueuePage.as_view(), name="finance_cashouts"),
    path(
        "finance/cashouts/<int:cashout_id>/approve/",
        finance.CashoutApprovePage.as_view(),
        name="finance_cashout_approve",
    ),
    path(
        "finance/cashouts/<int:cashout_id>/reject/",
        finance.CashoutRejectPage.as_view(),
        name="finance_cashout_reject",
    ),
    path(
        "finance/cashouts/<int:cashout_id>/paid/",
        finance.CashoutPaidPage.as_view(),
        name="finance_cashout_paid",
    ),
    path("finance/exports/", finance.ExportsPage.as_view(), name="finance_exports"),
    path("finance/exports/<int:export_id>/", finance.ExportPage.as_view(), name="finance_export"),
    path(
        "finance/exports/<int:export_id>/download/",
        finance.ExportDownloadPage.as_view(),
        name="finance_export_download",
    ),
    path(
        "finance/exports/<int:export_id>/head/",
        finance.ExportHeadPage.as_view(),
        name="finance_export_head",
    ),
    path("finance/statements/", finance.StatementsPage.as_view(), name="finance_statements"),
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
