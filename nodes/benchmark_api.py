"""The agent's side of hardware benchmarks: take the one due, report what it measured."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.bodies import validated
from nodes.auth import IsAgent
from nodes.services import benchmark_report, benchmark_take


class BenchmarkOut(serializers.Serializer):
    id = serializers.IntegerField()
    spec = serializers.JSONField(help_text="Run it with `python -m agent.benchmark`.")
    signature = serializers.CharField(help_text="The hub's Ed25519 signature over the spec.")


class BenchmarkReportIn(serializers.Serializer):
    report = serializers.DictField(help_text="What `python -m agent.benchmark` printed.")


class BenchmarkResultOut(serializers.Serializer):
    state = serializers.CharField()
    tier = serializers.CharField(help_text="The tier the figures support; blank if it failed.")
    figures = serializers.JSONField()
    problems = serializers.ListField(child=serializers.CharField())


class AgentBenchmarkApi(APIView):
    permission_classes = [IsAgent]

    @extend_schema(
        responses={200: BenchmarkOut, 204: None},
        summary="The hardware benchmark waiting for this node (204: none)",
    )
    def get(self, request: Request) -> Response:
        benchmark = benchmark_take(node=request.auth)
        if benchmark is None:
            return Response(status=204)
        return Response(
            {"id": benchmark.pk, "spec": benchmark.spec, "signature": benchmark.signature}
        )


class AgentBenchmarkReportApi(APIView):
    permission_classes = [IsAgent]

    @extend_schema(
        request=BenchmarkReportIn,
        responses=BenchmarkResultOut,
        summary="Report a benchmark's figures; the hub checks them against its seed",
    )
    def post(self, request: Request, benchmark_id: int) -> Response:
        body = validated(BenchmarkReportIn, request.data)
        benchmark = benchmark_report(
            node=request.auth, benchmark_id=benchmark_id, report=body["report"]
        )
        return Response(
            {
                "state": benchmark.state,
                "tier": benchmark.tier,
                "figures": benchmark.figures,
                "problems": benchmark.problems,
            }
        )
