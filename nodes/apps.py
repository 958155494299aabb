from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "nodes"
    verbose_name = "Nodes"

    def ready(self) -> None:
        from core.metrics import register_gauge
        from ledger.projections import register_projection
        from ledger.quotes import register_market_tflops
        from nodes import events, metrics  # noqa: F401 - events registers the event types
        from nodes.auth import resolve_agent_key
        from nodes.projection import NodesProjection
        from nodes.selectors import market_tflops
        from people.auth import register_key_resolver
        from people.keys import AGENT_PREFIX

        register_key_resolver(AGENT_PREFIX, resolve_agent_key)
        register_projection(NodesProjection())
        for name, help_text, source in (
            ("computepool_nodes", "Nodes by state, tier and region.", metrics.node_samples),
            (
                "computepool_node_heartbeat_lag_seconds",
                "Seconds since the last heartbeat of the nodes in service, by state (max, mean).",
                metrics.heartbeat_lag_samples,
            ),
            (
                "computepool_gpus",
                "GPUs of the nodes in service, by tier, as their last heartbeats reported them.",
                metrics.gpu_count_samples,
            ),
            (
                "computepool_gpu_temperature_celsius",
                "GPU temperature of the nodes in service by tier (max, mean), last heartbeat.",
                metrics.gpu_temperature_samples,
            ),
            (
                "computepool_gpu_utilization_percent",
                "GPU utilisation of the nodes in service by tier (max, mean), last heartbeat.",
                metrics.gpu_utilization_samples,
            ),
        ):
            register_gauge(name, help_text, source)
        register_market_tflops(market_tflops)
