"""Prometheus metrics of `python -m live serve`, under vLLM's names so its dashboards work as is.

Names follow vLLM V1 (vllm/v1/metrics/loggers.py): the gauges `vllm:num_requests_running`,
`vllm:num_requests_waiting` and `vllm:kv_cache_usage_perc` (a fraction 0..1, despite the name;
vLLM renamed it from `gpu_cache_usage_perc`), the counters `vllm:prompt_tokens_total`,
`vllm:generation_tokens_total`, `vllm:num_preemptions_total` and `vllm:request_success_total`
(label finished_reason), and the histograms `vllm:time_to_first_token_seconds`,
`vllm:inter_token_latency_seconds` (plus its older name `vllm:time_per_output_token_seconds`,
which vLLM still emits with the same values), `vllm:request_time_per_output_token_seconds`,
`vllm:e2e_request_latency_seconds`, `vllm:request_queue_time_seconds`,
`vllm:request_prompt_tokens` and `vllm:request_generation_tokens`. Labels: model_name, engine.

Each server has its own registry (not prometheus_client's global one), so several servers in
one process (tests) do not clash.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # no *_created series (vLLM turns them off too)

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)  # vLLM's
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
FINISH_REASONS = ("stop", "length", "abort")
CONTENT_TYPE = CONTENT_TYPE_LATEST


def _token_buckets(max_model_len: int) -> list[float]:
    """vLLM's 1-2-5 buckets up to max_model_len: 1, 2, 5, 10, 20, 50, ..."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return out
            out.append(float(m * scale))
        scale *= 10


class ServeMetrics:
    """The server's metrics; the engine thread updates them (prometheus_client is thread-safe)."""

    def __init__(self, model_name: str, max_model_len: int) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model_name, "engine": "0"}
        names = list(labels)
        r = self.registry

        def gauge(name, doc):
            return Gauge(name, doc, names, registry=r).labels(**labels)

        def counter(name, doc):
            return Counter(name, doc, names, registry=r).labels(**labels)

        def histogram(name, doc, buckets):
            return Histogram(name, doc, names, buckets=buckets, registry=r).labels(**labels)

        self.running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        self.kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=r,
        )
        self.success = {
            reason: success.labels(**labels, finished_reason=reason) for reason in FINISH_REASONS
        }
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.tpot_old = histogram(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per "
            "output token in seconds (older name of the inter-token "
            "latency).",
            ITL_BUCKETS,
        )
        self.request_tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            LATENCY_BUCKETS,
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            LATENCY_BUCKETS,
        )
        tokens = _token_buckets(max_model_len)
        self.request_prompt = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens
        )
        self.request_generation = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )

    def token(self, gap_s: float | None, ttft_s: float | None) -> None:
        """One output token: the first one's TTFT, or the gap since the previous token."""
        self.generation_tokens.inc()
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
        if gap_s is not None:
            self.itl.observe(gap_s)
            self.tpot_old.observe(gap_s)

    def finished(
        self,
        reason: str,
        e2e_s: float,
        queue_s: float,
        prompt: int,
        generated: int,
        tpot_s: float | None,
    ) -> None:
        self.success[reason].inc()
        self.e2e.observe(e2e_s)
        self.queue.observe(queue_s)
        self.request_prompt.observe(prompt)
        self.request_generation.observe(generated)
        if tpot_s is not None:
            self.request_tpot.observe(tpot_s)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
