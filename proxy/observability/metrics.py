"""Prometheus metrics, served at `/metrics`. Prefix `contextlift_`, base units, `_total` counters, and bounded
labels only: route template, strategy names, status class, upstream model (the first few seen, then
`other`); never raw paths or anything a client wrote."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from contextlift.proxy.request_log import RequestRecord

MAX_MODEL_LABELS = 20
"""Distinct model label values kept; a client that invents model names cannot grow the series without end."""
RANKING_OUTCOMES = frozenset(
    {"ok", "timeout", "unreachable", "http-1xx", "http-3xx", "http-4xx", "http-5xx", "bad-answer", "oversized",
     "circuit-open", "unknown", "no-embedder", "error", "members-failed"}
)  # fmt: skip
"""Outcomes counted by name; a plugin ranker's own reason is counted as `other`, so the label stays bounded."""
_Labelled = TypeVar("_Labelled", Counter, Histogram)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class _CacheCollector(Collector):
    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        hits, misses = self._counts()
        yield CounterMetricFamily("contextlift_embedding_cache_hits", "Embeddings served from the cache.", hits)
        yield CounterMetricFamily("contextlift_embedding_cache_misses", "Embeddings computed.", misses)


class ProxyMetrics:
    """The proxy's metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._models: set[str] = set()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.requests = Counter(
            "contextlift_requests", "Requests handled.", ["route", "strategy", "status_class", "model"],
            registry=self.registry,
        )  # fmt: skip
        self.duration = Histogram(
            "contextlift_request_duration_seconds", "Time from request to the end of the response.",
            ["route", "strategy"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.first_token = Histogram(
            "contextlift_time_to_first_token_seconds", "Time from request to the first streamed event.",
            ["strategy"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.upstream_calls = Counter(
            "contextlift_upstream_calls", "Upstream HTTP requests by outcome.", ["outcome"], registry=self.registry
        )
        self.step_duration = Histogram(
            "contextlift_strategy_step_duration_seconds", "Time spent in one strategy step, its calls included.",
            ["strategy"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.rankings = Counter(
            "contextlift_rankings", "Document rankings by ranker and outcome (ok, or why it fell back).",
            ["ranker", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.tokens = Counter(
            "contextlift_tokens", "Tokens reported by the upstream.", ["direction", "model"], registry=self.registry
        )
        self.detections = Counter(
            "contextlift_detections", "Chat requests by the document shape found, or why none was (`none: ...`).",
            ["format"], registry=self.registry,
        )  # fmt: skip
        self.in_flight = Gauge("contextlift_requests_in_flight", "Requests being handled.", registry=self.registry)
        self.shadow_samples = Counter(
            "contextlift_shadow_samples", "Requests sampled for shadow evaluation, by what became of them "
            "(evaluated, dropped-queue, dropped-budget, not-served, no-documents, failed, sink-failed: its record "
            "could not be written, skipped-no-key: no operator key and shadow_use_client_key off, not-kept: a body "
            "over shadow_max_body_bytes or several choices, abandoned: unfinished at shutdown).", ["outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.policy_rules = Counter(
            "contextlift_policy_rules", "Requests that asked for auto, by the policy rule applied (none: no match).",
            ["rule"], registry=self.registry,
        )  # fmt: skip
        self.policy_reloads = Counter(
            "contextlift_policy_reloads", "Policy files read, by outcome (loaded, refused).", ["outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.shadow_pending = Gauge(
            "contextlift_shadow_pending", "Sampled requests queued or being evaluated.", registry=self.registry
        )
        self.shadow_agreement = Counter(
            "contextlift_shadow_agreement", "Shadow runs of a candidate pipeline, by whether its answer agrees "
            "with the served one (agrees, differs, error).", ["candidate", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.shadow_position = Counter(
            "contextlift_shadow_position", "Evaluated samples by whether the served answer changed when the "
            "documents were reordered (sensitive, stable, unknown).", ["model", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.shadow_calls = Counter(
            "contextlift_shadow_upstream_calls", "Upstream calls made by shadow runs of a candidate.", ["candidate"],
            registry=self.registry,
        )  # fmt: skip
        self.shadow_probes = Counter(
            "contextlift_shadow_probes", "Positional probe runs (shadow_probes), by the needle's position (first, "
            "middle, last), the pipeline (none, served, or a candidate) and outcome (correct, wrong, error).",
            ["model", "position", "pipeline", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.shadow_latency_ratio = Histogram(
            "contextlift_shadow_latency_ratio", "A candidate's wall time over the served request's.", ["candidate"],
            buckets=(0.5, 1, 1.5, 2, 3, 5, 10, 20), registry=self.registry,
        )  # fmt: skip

    def watch_cache(self, counts: Callable[[], tuple[int, int]]) -> None:
        """Export the embedder's cache hits and misses, read at scrape time."""
        self.registry.register(_CacheCollector(counts))

    def model_label(self, model: str | None) -> str:
        """The label value of a client-named model: bounded in count, length and alphabet, so that no request
        can make a series that breaks a scrape or grows without end."""
        if not model:
            return "none"
        if not _valid_label(model):
            return "invalid"
        if model in self._models or len(self._models) < MAX_MODEL_LABELS:
            self._models.add(model)
            return model
        return "other"

    def observe_request(self, record: RequestRecord, seconds: float) -> None:
        strategy = ",".join(record.strategy_names) or "none"
        model = self.model_label(record.model)
        status_class = f"{(record.status or 0) // 100}xx"
        self._child(self.requests, record.route, strategy, status_class, model).inc()
        self._child(self.duration, record.route, strategy).observe(seconds)
        if record.first_event_seconds is not None:
            self._child(self.first_token, strategy).observe(record.first_event_seconds)
        failures = record.ledger.failure_codes
        if record.ledger.calls > len(failures):
            self._child(self.upstream_calls, "ok").inc(record.ledger.calls - len(failures))
        for code in failures:
            self._child(self.upstream_calls, code).inc()
        if record.route == CHAT_ROUTE:
            self._child(self.detections, format_label(record.document_format)).inc()
        usage = record.ledger.usage
        if usage.get("prompt_tokens"):
            self._child(self.tokens, "in", model).inc(usage["prompt_tokens"])
        if usage.get("completion_tokens"):
            self._child(self.tokens, "out", model).inc(usage["completion_tokens"])

    def _child(self, metric: _Labelled, *labels: str) -> _Labelled:
        """`metric.labels(*labels)`, looked up once per series: prometheus_client's lookup (a lock, every value
        checked and converted) was most of what a request cost here. The labels are bounded, so is this."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe_ranking(self, ranker: str, outcome: str) -> None:
        """One ranking by `ranker` (a configured name: bounded) and its outcome: `ok`, or why it fell back to the
        client's order (a reason from a fixed set: timeout, unreachable, http-4xx, bad-answer, circuit-open ...)."""
        self.rankings.labels(ranker, outcome if outcome in RANKING_OUTCOMES else "other").inc()

    def observe_step(self, strategy: str, seconds: float) -> None:
        self.step_duration.labels(strategy).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


_MAX_LABEL = 128
CHAT_ROUTE = "/v1/chat/completions"


def format_label(detection: str) -> str:
    """The label of a detection outcome: the shape without its details (`paragraphs; region=fence` counts as
    `paragraphs`, every declared format as `declared`), or the reason nothing was found: a fixed set."""
    shape = detection.split(";", 1)[0]
    return "declared" if shape.startswith("declared:") else shape


def _valid_label(value: str) -> bool:
    # Lone surrogates (the only strings UTF-8 cannot encode) are unprintable too: one test covers both.
    return len(value) <= _MAX_LABEL and value.isprintable()
