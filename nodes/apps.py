from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "nodes"
    verbose_name = "Nodes"

    def ready(self) -> None:
        from core.metrics import register_gauge
        from ledger.projections import register_projection
        from ledger.quotes import register_market_tflops
        from nodes import events  # noqa: F401 - registers the nodes' event types
        from nodes.auth import resolve_agent_key
        from nodes.metrics import node_samples
        from nodes.projection import NodesProjection
        from nodes.selectors import market_tflops
        from people.auth import register_key_resolver
        from people.keys import AGENT_PREFIX

        register_key_resolver(AGENT_PREFIX, resolve_agent_key)
        register_projection(NodesProjection())
        register_gauge("computepool_nodes", "Nodes by state.", node_samples)
        register_market_tflops(market_tflops)
