"""The economy's HTTP API: thin views that validate, call one service, and serialize."""

import json

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ParseError, PermissionDenied, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsFinance, IsPerson, acting_roles, has_role
from ledger import quotes
from ledger.accounts import available_code
from ledger.cashouts import cashout_approve, cashout_mark_paid, cashout_reject, cashout_request
from ledger.exports import cashout_export_create, export_csv_chunks
from ledger.funding import (
    SIGNATURE_HEADER,
    credits_grant,
    credits_topup_from_payment,
    webhook_verify,
)
from ledger.models_cashouts import Cashout, CashoutExport
from ledger.pricing import rules_at, spot_price_get
from ledger.selectors import balance_of, user_balances
from ledger.serializers import (
    BalancesOut,
    CashoutIn,
    CashoutListQuery,
    CashoutOut,
    EntryOut,
    ExportDetailOut,
    ExportIn,
    ExportOut,
    GrantIn,
    JobQuoteOut,
    NodeQuoteOut,
    PaidIn,
    PaymentIn,
    QuoteQuery,
    RejectIn,
    StatementOut,
    StatementQuery,
    WebhookOut,
)
from ledger.statements import statement_csv_chunks, statement_lines, statement_summary

FINANCE_ROLES = {"finance", "admin"}
IsOperatorOrFinance = has_role("operator", "finance", "admin")


def _actor(request: Request) -> str:
    return f"user:{request.user.pk}"


def _csv_response(chunks, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class CSVRenderer(BaseRenderer):
    """Lets `?format=csv` select the CSV branch; the view streams the file itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        # Only errors reach here (the view streams its own CSV): say them plainly.
        return json.dumps(data).encode()


# --- Credits ----------------------------------------------------------------------------------


class GrantApi(APIView):
    permission_classes = [IsFinance]

    @extend_schema(request=GrantIn, responses={201: EntryOut}, summary="Grant credits (finance)")
    def post(self, request: Request) -> Response:
        data = GrantIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        entry = credits_grant(
            user_id=v["user_id"],
            amount=v["amount_minor"],
            actor=_actor(request),
            reference=v["reference"],
            idempotency_key=v["idempotency_key"],
        )
        out = {
            "entry_id": entry.pk,
            "user_id": v["user_id"],
            "amount_minor": v["amount_minor"],
            "credits": quotes.format_minor(v["amount_minor"]),
            "available_minor": balance_of(available_code(v["user_id"])),
        }
        return Response(EntryOut(out).data, status=status.HTTP_201_CREATED)


class PaymentWebhookApi(APIView):
    """Called by the payment provider, authenticated by its HMAC signature, not by a key."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        request=PaymentIn,
        responses={200: WebhookOut},
        summary="Payment provider webhook (HMAC-SHA256 signed)",
        parameters=[OpenApiParameter(SIGNATURE_HEADER, str, OpenApiParameter.HEADER)],
    )
    def post(self, request: Request) -> Response:
        body = request.body  # the raw bytes that were signed; read before anything parses them
        webhook_verify(body, request.headers.get(SIGNATURE_HEADER))
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ParseError("the body is not JSON") from None
        data = PaymentIn(data=payload if isinstance(payload, dict) else {})
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v["type"] != "payment.succeeded":
            return Response({"status": "ignored", "entry_id": None, "amount_minor": None})
        entry = credits_topup_from_payment(
            payment_id=v["id"], user_id=v["user_id"], paid_paise=v["amount_paise"]
        )
        amount = entry.event.payload["amount_minor"]
        return Response({"status": "credited", "entry_id": entry.pk, "amount_minor": amount})


class BalancesApi(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=BalancesOut, summary="My credit balances")
    def get(self, request: Request) -> Response:
        figures = user_balances(user_id=request.user.pk).as_dict()
        out = {f"{k}_minor": v for k, v in figures.items()}
        out.update({k: quotes.format_minor(v) for k, v in figures.items()})
        return Response(BalancesOut(out).data)


# --- Quotes -----------------------------------------------------------------------------------


class QuoteApi(APIView):
    permission_classes = [IsPerson]

    @extend_schema(
        parameters=[QuoteQuery],
        responses={200: OpenApiResponse(description="JobQuoteOut or NodeQuoteOut")},
        summary="What a job would cost now, or what a node earns per hour",
    )
    def get(self, request: Request) -> Response:
        query = QuoteQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        rules = rules_at()
        tier, region = q["tier"], q["region"]
        spot = spot_price_get(region=region, tier=tier, rules=rules)
        tflops = quotes.market_tflops(region=region, tier=tier)

        def per_tflop_hour(price: int) -> dict[str, object]:
            cost = quotes.cost_per_tflop_hour(price_per_s_minor=price, tflops=tflops)
            return {
                "measured_tflops": tflops,
                "cost_per_tflop_hour_minor": cost,
                "cost_per_tflop_hour_credits": None if cost is None else quotes.format_minor(cost),
            }

        if q["for"] == "job":
            quote = quotes.job_quote(
                ceiling_per_s_minor=q["ceiling_per_s_minor"],
                timeout_s=q["timeout_s"],
                slices=q["slices"],
                spot_per_s_minor=spot,
                expected_runtime_s=q.get("expected_runtime_s"),
                replicas=q["replicas"],
            )
            out = {
                "tier": tier,
                "region": region,
                "book_version": rules.version,
                "spot_per_s_minor": spot,
                "within_ceiling": quote.within_ceiling,
                "max_minor": quote.max_minor,
                "expected_minor": quote.expected_minor,
                "max_credits": quotes.format_minor(quote.max_minor),
                "expected_credits": quotes.format_minor(quote.expected_minor),
                **per_tflop_hour(spot),
            }
            return Response(JobQuoteOut(out).data)
        price = quotes.node_price(spot_per_s_minor=spot, floor_per_s_minor=q["floor_per_s_minor"])
        earnings = quotes.node_earnings_per_hour(
            price_per_s_minor=price,
            fee_bps=rules.platform_fee_bps,
            paise_per_credit=rules.paise_per_credit,
        )
        out = {
            "tier": tier,
            "region": region,
            "book_version": rules.version,
            "spot_per_s_minor": spot,
            "price_per_s_minor": price,
            "fee_bps": rules.platform_fee_bps,
            "gross_per_hour_minor": earnings.gross_per_hour_minor,
            "fee_per_hour_minor": earnings.fee_per_hour_minor,
            "operator_per_hour_minor": earnings.operator_per_hour_minor,
            "operator_per_hour_paise": earnings.operator_per_hour_paise,
            "operator_per_hour_credits": quotes.format_minor(earnings.operator_per_hour_minor),
            **per_tflop_hour(price),
            "operator_per_hour_inr": quotes.format_paise(earnings.operator_per_hour_paise),
        }
        return Response(NodeQuoteOut(out).data)


# --- Cashouts ---------------------------------------------------------------------------------


def _cashouts_visible(request: Request):
    """Finance sees every cashout; an operator only their own."""
    if acting_roles(request) & FINANCE_ROLES:
        return Cashout.objects.all()
    return Cashout.objects.filter(operator_id=request.user.pk)


class CashoutListCreateApi(generics.ListAPIView):
    permission_classes = [IsOperatorOrFinance]
    serializer_class = CashoutOut

    def get_queryset(self):
        query = CashoutListQuery(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        cashouts = _cashouts_visible(self.request)
        if "status" in query.validated_data:
            cashouts = cashouts.filter(status=query.validated_data["status"])
        return cashouts

    @extend_schema(parameters=[CashoutListQuery], summary="Cashouts: mine, or all for finance")
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=CashoutIn, responses={201: CashoutOut}, summary="Ask to cash out")
    def post(self, request: Request) -> Response:
        if "operator" not in acting_roles(request):
            raise PermissionDenied("Only an operator's key can ask for a cashout.")
        header_key = request.headers.get("Idempotency-Key")
        if header_key is not None and not 1 <= len(header_key) <= 100:
            raise ValidationError({"Idempotency-Key": ["1-100 characters"]})
        data = CashoutIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        cashout = cashout_request(
            operator_id=request.user.pk,
            amount=v["amount_minor"],
            payout_details=v["payout_details"],
            actor=_actor(request),
            idempotency_key=v.get("idempotency_key") or request.headers.get("Idempotency-Key"),
        )
        return Response(CashoutOut(cashout).data, status=status.HTTP_201_CREATED)


class CashoutDetailApi(generics.RetrieveAPIView):
    permission_classes = [IsOperatorOrFinance]
    serializer_class = CashoutOut
    lookup_url_kwarg = "cashout_id"

    def get_queryset(self):
        return _cashouts_visible(self.request)


class CashoutApproveApi(APIView):
    permission_classes = [IsFinance]

    @extend_schema(request=None, responses=CashoutOut, summary="Approve a cashout (finance)")
    def post(self, request: Request, cashout_id: int) -> Response:
        get_object_or_404(Cashout, pk=cashout_id)
        cashout = cashout_approve(cashout_id=cashout_id, actor=_actor(request))
        return Response(CashoutOut(cashout).data)


class CashoutRejectApi(APIView):
    permission_classes = [IsFinance]

    @extend_schema(request=RejectIn, responses=CashoutOut, summary="Reject a cashout (finance)")
    def post(self, request: Request, cashout_id: int) -> Response:
        get_object_or_404(Cashout, pk=cashout_id)
        data = RejectIn(data=request.data)
        data.is_valid(raise_exception=True)
        cashout = cashout_reject(
            cashout_id=cashout_id, reason=data.validated_data["reason"], actor=_actor(request)
        )
        return Response(CashoutOut(cashout).data)


class CashoutPaidApi(APIView):
    permission_classes = [IsFinance]

    @extend_schema(request=PaidIn, responses=CashoutOut, summary="Mark a cashout paid (finance)")
    def post(self, request: Request, cashout_id: int) -> Response:
        get_object_or_404(Cashout, pk=cashout_id)
        data = PaidIn(data=request.data)
        data.is_valid(raise_exception=True)
        cashout = cashout_mark_paid(
            cashout_id=cashout_id,
            payout_reference=data.validated_data["payout_reference"],
            actor=_actor(request),
        )
        return Response(CashoutOut(cashout).data)


# --- Exports ----------------------------------------------------------------------------------


class ExportListCreateApi(generics.ListAPIView):
    permission_classes = [IsFinance]
    serializer_class = ExportOut
    queryset = CashoutExport.objects.all()

    @extend_schema(
        request=ExportIn, responses={201: ExportDetailOut}, summary="Export cashouts (CSV)"
    )
    def post(self, request: Request) -> Response:
        data = ExportIn(data=request.data)
        data.is_valid(raise_exception=True)
        export = cashout_export_create(
            period_from=data.validated_data["from"],
            period_to=data.validated_data["to"],
            actor=_actor(request),
        )
        return Response(ExportDetailOut(export).data, status=status.HTTP_201_CREATED)


class ExportDetailApi(generics.RetrieveAPIView):
    permission_classes = [IsFinance]
    serializer_class = ExportDetailOut
    queryset = CashoutExport.objects.all()
    lookup_url_kwarg = "export_id"


class ExportDownloadApi(APIView):
    permission_classes = [IsFinance]

    @extend_schema(
        responses={(200, "text/csv"): OpenApiTypes.BINARY},
        summary="Download an export's CSV (the same bytes every time)",
    )
    def get(self, request: Request, export_id: int) -> StreamingHttpResponse:
        export = get_object_or_404(CashoutExport, pk=export_id)
        response = _csv_response(export_csv_chunks(export), export.filename)
        response["X-Content-SHA256"] = export.sha256
        return response


# --- Statements -------------------------------------------------------------------------------


class StatementApi(APIView):
    permission_classes = [IsPerson]
    renderer_classes = [JSONRenderer, CSVRenderer]

    def handle_exception(self, exc: Exception) -> Response:
        # An error is JSON in the API's one shape, even where the answer would have been CSV.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[
            StatementQuery,
            OpenApiParameter("format", str, enum=["json", "csv"], required=False),
        ],
        responses={200: StatementOut, (200, "text/csv"): OpenApiTypes.BINARY},
        summary="My statement: earnings and spending over a period",
    )
    def get(self, request: Request) -> Response | StreamingHttpResponse:
        query = StatementQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        period = {"user_id": request.user.pk, "period_from": q["from"], "period_to": q["to"]}
        if request.accepted_renderer.format == "csv":
            name = f"statement-{q['from']:%Y%m%d}-{q['to']:%Y%m%d}.csv"
            return _csv_response(statement_csv_chunks(**period), name)
        summary = statement_summary(**period)
        lines = list(statement_lines(**period, after=q["after"], limit=q["limit"]))
        out = {
            "user_id": summary.user_id,
            "period_from": summary.period_from,
            "period_to": summary.period_to,
            "accounts": summary.accounts,
            "totals": summary.totals,
            "lines": lines,
            "next_after": lines[-1]["posting_id"] if len(lines) == q["limit"] else None,
        }
        return Response(StatementOut(out).data)
