"""Input and output shapes of the economy's API. Amounts are integers in minor units (credits)
or paise, with a formatted twin for display: clients never compute money."""

from collections.abc import Callable
from typing import Any

from rest_framework import serializers

from core.api.fields import REGION_HELP, RegionField
from ledger.exports import export_head
from ledger.models_cashouts import Cashout, CashoutExport, CashoutStatus
from ledger.quotes import format_minor, format_paise

MAX_MINOR = 10**15


class MinorField(serializers.IntegerField):
    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_MINOR)
        super().__init__(**kwargs)


# --- Credits ----------------------------------------------------------------------------------


class GrantIn(serializers.Serializer):
    user_id = serializers.IntegerField(min_value=1)
    amount_minor = MinorField(help_text="Credits in minor units (1 credit = 100).")
    reference = serializers.CharField(max_length=200, allow_blank=True, default="")
    idempotency_key = serializers.CharField(max_length=150)


class EntryOut(serializers.Serializer):
    entry_id = serializers.IntegerField()
    user_id = serializers.IntegerField()
    amount_minor = serializers.IntegerField()
    credits = serializers.CharField()
    available_minor = serializers.IntegerField()


class PaymentIn(serializers.Serializer):
    id = serializers.CharField(max_length=150, help_text="The provider's payment id.")
    type = serializers.CharField(max_length=64)
    user_id = serializers.IntegerField(min_value=1, required=False)
    amount_paise = serializers.IntegerField(min_value=1, max_value=MAX_MINOR, required=False)
    currency = serializers.ChoiceField(choices=["INR"], required=False)

    def validate(self, attrs):
        if attrs["type"] == "payment.succeeded":
            missing = [f for f in ("user_id", "amount_paise", "currency") if f not in attrs]
            if missing:
                raise serializers.ValidationError(dict.fromkeys(missing, "required"))
        return attrs


class WebhookOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=["credited", "ignored"])
    entry_id = serializers.IntegerField(allow_null=True)
    amount_minor = serializers.IntegerField(allow_null=True)


class BalancesOut(serializers.Serializer):
    available_minor = serializers.IntegerField()
    held_minor = serializers.IntegerField()
    earnings_minor = serializers.IntegerField()
    cashout_pending_minor = serializers.IntegerField()
    available = serializers.CharField()
    held = serializers.CharField()
    earnings = serializers.CharField()
    cashout_pending = serializers.CharField()


# --- Quotes -----------------------------------------------------------------------------------


def _keyword_field(name: str, make: Callable[[], serializers.Field]):
    """A `get_fields` adding a field named by a Python keyword (`from`, `for`)."""

    def get_fields(self):
        fields = serializers.Serializer.get_fields(self)
        fields[name] = make()
        return fields

    return get_fields


class QuoteQuery(serializers.Serializer):
    get_fields = _keyword_field(
        "for", lambda: serializers.ChoiceField(choices=["job", "node"], default="job")
    )
    tier = serializers.CharField(max_length=32)
    region = RegionField(allow_blank=True, default="", help_text=f"{REGION_HELP}; blank for none")
    job_kind = serializers.SlugField(max_length=32, default="default")
    ceiling_per_s_minor = serializers.IntegerField(min_value=1, max_value=10**9, required=False)
    timeout_s = serializers.IntegerField(min_value=1, max_value=30 * 86400, required=False)
    slices = serializers.IntegerField(min_value=1, max_value=100_000, default=1)
    replicas = serializers.IntegerField(
        min_value=1, max_value=16, default=1, help_text="a verified job's replicas per slice"
    )
    expected_runtime_s = serializers.IntegerField(min_value=0, max_value=30 * 86400, required=False)
    floor_per_s_minor = serializers.IntegerField(min_value=0, max_value=10**9, default=0)

    def validate(self, attrs):
        if attrs["for"] == "job":
            missing = [f for f in ("ceiling_per_s_minor", "timeout_s") if f not in attrs]
            if missing:
                raise serializers.ValidationError(dict.fromkeys(missing, "required for a job"))
        return attrs


class PerTflopHourOut(serializers.Serializer):
    measured_tflops = serializers.FloatField(
        allow_null=True,
        help_text="The median float32 TFLOPS measured on this market's online nodes (CPU: "
        "GFLOPS / 1000); null where none was measured.",
    )
    cost_per_tflop_hour_minor = serializers.IntegerField(
        allow_null=True, help_text="An hour at this price over the measured TFLOPS."
    )
    cost_per_tflop_hour_credits = serializers.CharField(allow_null=True)


class JobQuoteOut(PerTflopHourOut):
    tier = serializers.CharField()
    region = serializers.CharField()
    book_version = serializers.IntegerField()
    spot_per_s_minor = serializers.IntegerField()
    within_ceiling = serializers.BooleanField()
    max_minor = serializers.IntegerField(
        help_text="What submitting holds: ceiling × timeout × slices × replicas."
    )
    expected_minor = serializers.IntegerField()
    max_credits = serializers.CharField()
    expected_credits = serializers.CharField()


class NodeQuoteOut(PerTflopHourOut):
    tier = serializers.CharField()
    region = serializers.CharField()
    book_version = serializers.IntegerField()
    spot_per_s_minor = serializers.IntegerField()
    price_per_s_minor = serializers.IntegerField()
    fee_bps = serializers.IntegerField()
    gross_per_hour_minor = serializers.IntegerField()
    fee_per_hour_minor = serializers.IntegerField()
    operator_per_hour_minor = serializers.IntegerField()
    operator_per_hour_paise = serializers.IntegerField()
    operator_per_hour_credits = serializers.CharField()
    operator_per_hour_inr = serializers.CharField()


# --- Cashouts ---------------------------------------------------------------------------------


class CashoutIn(serializers.Serializer):
    amount_minor = MinorField()
    payout_details = serializers.JSONField(
        help_text='{"method": "upi", "vpa": "name@bank"} or {"method": "bank", '
        '"account_name", "account_number", "ifsc"}'
    )
    idempotency_key = serializers.CharField(max_length=100, required=False)


class CashoutOut(serializers.ModelSerializer):
    credits = serializers.SerializerMethodField()
    inr = serializers.SerializerMethodField()

    class Meta:
        model = Cashout
        fields = (
            "id",
            "operator_id",
            "status",
            "amount_minor",
            "fee_minor",
            "inr_paise",
            "credits",
            "inr",
            "payout_details",
            "requested_at",
            "approved_at",
            "decided_at",
            "reason",
            "paid_at",
            "payout_reference",
        )

    def get_credits(self, obj: Cashout) -> str:
        return format_minor(obj.amount_minor)

    def get_inr(self, obj: Cashout) -> str:
        return format_paise(obj.inr_paise)


class CashoutListQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=CashoutStatus.choices, required=False)


class RejectIn(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class PaidIn(serializers.Serializer):
    payout_reference = serializers.CharField(max_length=128)


# --- Exports ----------------------------------------------------------------------------------


class ExportIn(serializers.Serializer):
    get_fields = _keyword_field("from", serializers.DateTimeField)
    to = serializers.DateTimeField()

    def validate(self, attrs):
        if attrs["from"] >= attrs["to"]:
            raise serializers.ValidationError({"to": "must be after from"})
        return attrs


class ExportOut(serializers.ModelSerializer):
    download = serializers.SerializerMethodField()

    class Meta:
        model = CashoutExport
        fields = (
            "id",
            "period_from",
            "period_to",
            "created_by",
            "created_at",
            "count",
            "total_amount_minor",
            "total_fee_minor",
            "total_inr_paise",
            "sha256",
            "chain_head",
            "chain_seq",
            "download",
        )

    def get_download(self, obj: CashoutExport) -> str:
        return f"/api/v1/exports/{obj.pk}/download"


class ExportDetailOut(ExportOut):
    """One export, with its head (a few reads more, so not in the list)."""

    head = serializers.SerializerMethodField(
        help_text="The signed chain head at export time: keep it with the CSV, outside the "
        "hub; `manage.py verify_ledger --against FILE` checks that the log still holds the "
        "history it vouches for."
    )

    class Meta(ExportOut.Meta):
        fields = (*ExportOut.Meta.fields, "head")

    def get_head(self, obj: CashoutExport) -> dict[str, Any]:
        return export_head(obj)


# --- Statements -------------------------------------------------------------------------------


class StatementQuery(serializers.Serializer):
    get_fields = _keyword_field("from", serializers.DateTimeField)
    to = serializers.DateTimeField()
    after = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=5000, default=500)

    def validate(self, attrs):
        if attrs["from"] >= attrs["to"]:
            raise serializers.ValidationError({"to": "must be after from"})
        return attrs


class StatementAccountOut(serializers.Serializer):
    code = serializers.CharField()
    kind = serializers.CharField()
    opening_minor = serializers.IntegerField()
    closing_minor = serializers.IntegerField()


class StatementLineOut(serializers.Serializer):
    posting_id = serializers.IntegerField()
    recorded_at = serializers.CharField()
    kind = serializers.CharField()
    account = serializers.CharField()
    amount_minor = serializers.IntegerField()
    credits = serializers.CharField()
    ref = serializers.CharField()


class StatementOut(serializers.Serializer):
    user_id = serializers.IntegerField()
    period_from = serializers.DateTimeField()
    period_to = serializers.DateTimeField()
    accounts = StatementAccountOut(many=True)
    totals = serializers.DictField(child=serializers.IntegerField())
    lines = StatementLineOut(many=True)
    next_after = serializers.IntegerField(allow_null=True)
