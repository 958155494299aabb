"""The relay's figures for /metrics (docs/metrics.md), counted as each answer closes."""

import time

from core.metrics import SECONDS_SLOW, counter, histogram

STREAMS = counter(
    "computepool_relay_requests_total",
    "Inference requests the relay closed, by outcome (served: the node finished the answer; "
    "failed: it stopped, or no node answered) and whether the client streamed.",
    ["outcome", "stream"],
)
FIRST_TOKEN_SECONDS = histogram(
    "computepool_relay_first_token_seconds",
    "From the relay taking a request to its first token (failovers included).",
    SECONDS_SLOW,
)
TOKENS_PER_SECOND = histogram(
    "computepool_relay_tokens_per_second",
    "An answer's completion tokens per second after its first token, as the hub relayed them.",
    (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)
TOKENS = counter("computepool_relay_tokens_total", "Completion tokens the relay relayed.")


def request_closed(
    *, served: bool, stream: bool, started: float, ttft_ms: int | None, tokens: int
) -> None:
    """Count one closed request; `started` is its time.monotonic() when the relay took it."""
    STREAMS.labels("served" if served else "failed", "true" if stream else "false").inc()
    TOKENS.inc(tokens)
    if ttft_ms is None:
        return
    FIRST_TOKEN_SECONDS.observe(ttft_ms / 1000)
    generating = time.monotonic() - started - ttft_ms / 1000
    if tokens > 1 and generating > 0:
        TOKENS_PER_SECOND.observe(tokens / generating)
