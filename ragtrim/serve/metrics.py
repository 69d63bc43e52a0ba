"""Prometheus metrics of one gateway (its own registry, so several gateways can live in one process)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ragtrim._util import gcclock

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("ragtrim_serve_requests", "Requests by endpoint and outcome",
                                ["endpoint", "outcome"], registry=r)
        self.tokens = Counter("ragtrim_serve_tokens", "Tokens: prompt_in (before trimming), prompt_out (forwarded), "
                              "saved (removed by trimming), completion (from usage)", ["kind"], registry=r)
        self.trim_seconds = Histogram("ragtrim_serve_trim_seconds", "Time to prepare (trim, fold, count) a request",
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.trim_stage_seconds = Histogram(
            "ragtrim_serve_trim_stage_seconds", "Where the documents' trim spent its time: stage=pipeline for the "
            "whole trim (prefetch and model waits included), prefetch:<stage> for each stage's prefetch before the "
            "first stage ran, else each stage of the trace", ["stage"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.queue_wait_seconds = Histogram("ragtrim_serve_queue_wait_seconds", "Time queued for a concurrency slot",
                                            ["lane"], buckets=_LATENCY_BUCKETS, registry=r)
        self.upstream_ttft_seconds = Histogram("ragtrim_serve_upstream_ttft_seconds",
                                               "Upstream time to first byte (streaming: first event)",
                                               buckets=_LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("ragtrim_serve_in_flight", "Requests holding a slot, per org", ["org"], registry=r)
        self.queued = Gauge("ragtrim_serve_queued", "Requests waiting for a slot, per org", ["org"], registry=r)
        self.state_errors = Counter("ragtrim_serve_state_errors", "Shared-state (Redis) failures", registry=r)
        self.limiter_unavailable = Counter(
            "ragtrim_serve_limiter_unavailable", "Requests whose limits could not be checked (the state store "
            "failed), by limit (rate, slots) and what limits.fail_open made of them (admitted, refused)",
            ["limit", "action"], registry=r)
        self.limiter_failing = Gauge("ragtrim_serve_limiter_failing",
                                     "1 while the limiter's state store fails, else 0", registry=r)
        self.errors = Counter("ragtrim_serve_errors", "Error answers by endpoint, status and error code",
                              ["endpoint", "status", "code"], registry=r)
        self.reloads = Counter("ragtrim_serve_config_reloads", "Config reloads on SIGHUP by result (applied, refused)",
                               ["result"], registry=r)
        r.register(_GCPauses())

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _GCPauses(Collector):
    """The garbage collector's stops of the whole process (``ragtrim._util.gcclock``), read at each scrape: every
    thread waits while one runs, so a full collection's length lands on the requests in flight."""

    def collect(self) -> Iterator[Metric]:
        count = CounterMetricFamily("ragtrim_serve_gc_collections", "Garbage collections of the gateway's process, "
                                    "by generation (2: full)", labels=["generation"])
        seconds = CounterMetricFamily("ragtrim_serve_gc_pause_seconds", "Time the garbage collector stopped the "
                                      "gateway's process, by generation", labels=["generation"])
        longest = GaugeMetricFamily("ragtrim_serve_gc_longest_pause_seconds", "The longest stop of one collection "
                                    "so far, by generation", labels=["generation"])
        for generation, n, total, most in gcclock.totals():
            count.add_metric([str(generation)], n)
            seconds.add_metric([str(generation)], total)
            longest.add_metric([str(generation)], most)
        yield from (count, seconds, longest)
