from django.urls import path

from ledger import api

urlpatterns = [
    path("credits/grants", api.GrantApi.as_view(), name="credits-grant"),
    path("credits/webhook", api.PaymentWebhookApi.as_view(), name="credits-webhook"),
    path("credits/me", api.BalancesApi.as_view(), name="credits-me"),
    path("quote", api.QuoteApi.as_view(), name="quote"),
    path("cashouts/", api.CashoutListCreateApi.as_view(), name="cashouts"),
    path("cashouts/<int:cashout_id>", api.CashoutDetailApi.as_view(), name="cashout"),
    path(
        "cashouts/<int:cashout_id>/approve", api.CashoutApproveApi.as_view(), name="cashout-approve"
    ),
    path("cashouts/<int:cashout_id>/reject", api.CashoutRejectApi.as_view(), name="cashout-reject"),
    path("cashouts/<int:cashout_id>/paid", api.CashoutPaidApi.as_view(), name="cashout-paid"),
    path("exports/", api.ExportListCreateApi.as_view(), name="exports"),
    path("exports/<int:export_id>", api.ExportDetailApi.as_view(), name="export"),
    path(
        "exports/<int:export_id>/download", api.ExportDownloadApi.as_view(), name="export-download"
    ),
    path("statements/me", api.StatementApi.as_view(), name="statement-me"),
]
