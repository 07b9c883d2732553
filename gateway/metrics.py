"""The gateway's Prometheus metrics, served at `/metrics` (`runtime.metrics`).

Updated where things happen, at most one observation each: an executed operation
(`statefed_gateway_request_duration_seconds` by operation type and root field), each error of an
answer (`statefed_gateway_errors_total` by code), each node call (latency, failures by node and
reason), each coalesced node request (how many client lookups it carried); the histograms, observed
on every request, are `runtime.metrics.LoopHistogram`s (no lock). Read at scrape time from what the
gateway keeps anyway: cache hits and misses, open subscriptions, hedged reads. Root field labels are
bounded by the schema (`gateway.execute.labels`), node ids from membership and error codes from the
gateway's own set, each bounded (`runtime.metrics.bounded`).

A labelled counter is exported from before its first increment where its labels are known,
at 0: Prometheus takes a series' first sample as where it began, so `increase()` and `rate()`
would not see an increment that made the series appear. The error codes of the gateway's
own errors, of the query limits and of GraphQL over HTTP are counted from the start; a node's
call failures, of either reason, from the gateway's first call to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.model.errors import GatewayError
from runtime.graphql_http import (
    BAD_USER_INPUT,
    INTERNAL_SERVER_ERROR,
    QueryLimitError,
    RequestError,
)
from runtime.graphql_http.response import PARSE_FAILED, VALIDATION_FAILED
from runtime.metrics import Collected, LoopHistogram, LoopHistogramChild, bounded

__all__ = [
    "GatewayMetrics",
    "NodeCallFailure",
    "known_error_codes",
    "runtime_figures",
]

NodeCallFailure = Literal["timeout", "unavailable"]
_NODE_CALL_FAILURES: tuple[NodeCallFailure, ...] = ("timeout", "unavailable")

# seconds: a cached point read is ~1 ms, a fan-out tens, the default deadline 5 s
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# seconds a wake-up of the event loop came late: 20 ms is the longest pause issue 31 allows
_LOOP_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_MAX_NODES = 1024


class GatewayMetrics:
    """The metrics of one gateway app, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # histogram children (labels() costs more than an observation): both sets bounded
        self._by_operation: dict[tuple[str, str], LoopHistogramChild] = {}
        self._by_node: dict[str, LoopHistogramChild] = {}
        self._failures_by_node: dict[str, dict[NodeCallFailure, Counter]] = {}
        self._nodes: set[str] = set()
        self._codes: set[str] = set()
        self._requests = LoopHistogram(
            "statefed_gateway_request_duration_seconds",
            "Time to execute one GraphQL operation (planning, node calls, merging), by "
            "operation type and root field",
            ["operation", "root_field"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._errors = Counter(
            "statefed_gateway_errors",
            "Errors in answers to clients, by extensions.code",
            ["code"],
            registry=self.registry,
        )
        self._node_calls = LoopHistogram(
            "statefed_gateway_node_call_duration_seconds",
            "Time from sending a request to a node to its answer, by node",
            ["node"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._node_failures = Counter(
            "statefed_gateway_node_call_failures",
            "Node calls without an answer, by node and reason (timeout, unavailable)",
            ["node", "reason"],
            registry=self.registry,
        )
        self._coalesced = LoopHistogram(
            "statefed_gateway_coalesced_lookups",
            "Client lookups carried by one coalesced node request",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        ).labels()
        self._loop_lag = LoopHistogram(
            "statefed_gateway_event_loop_lag_seconds",
            "How late the event loop woke for a timer due every 10 ms: a pause of the loop "
            "(a long callback, a garbage collection) shows as one late wake-up that long",
            buckets=_LOOP_LAG_BUCKETS,
            registry=self.registry,
        ).labels()
        self._figures: list[Callable[[], Iterable[Metric]]] = []
        self.registry.register(Collected(self._collect))
        for code in known_error_codes():
            self._errors.labels(bounded(code, self._codes))

    def loop_lag(self, seconds: float) -> None:
        self._loop_lag.observe(seconds)

    def executed(self, labels: tuple[str, str], seconds: float) -> None:
        child = self._by_operation.get(labels)
        if child is None:
            child = self._by_operation[labels] = self._requests.labels(*labels)
        child.observe(seconds)

    def errors(self, errors: Sequence[dict[str, Any]]) -> None:
        """Count the errors of one answer body by their `extensions.code`."""
        for error in errors:
            code = (error.get("extensions") or {}).get("code") or "NONE"
            self.refused(str(code))

    def refused(self, code: str) -> None:
        self._errors.labels(bounded(code, self._codes)).inc()

    def node_answered(self, node_id: str, seconds: float) -> None:
        child = self._by_node.get(node_id)
        if child is None:
            label = bounded(node_id, self._nodes, _MAX_NODES)
            child = self._node_calls.labels(label)
            if label == node_id:
                self._by_node[node_id] = child
        child.observe(seconds)

    def node_known(self, node_id: str) -> None:
        """The gateway is about to call the node: its failures are counted from 0."""
        self._failures_of(node_id)

    def node_failed(self, node_id: str, reason: NodeCallFailure) -> None:
        self._failures_of(node_id)[reason].inc()

    def _failures_of(self, node_id: str) -> dict[NodeCallFailure, Counter]:
        """The node's failure counters, one per reason, made at 0 the first time."""
        children = self._failures_by_node.get(node_id)
        if children is None:
            label = bounded(node_id, self._nodes, _MAX_NODES)
            children = {r: self._node_failures.labels(label, r) for r in _NODE_CALL_FAILURES}
            if label == node_id:
                self._failures_by_node[node_id] = children
        return children

    def coalesced(self, lookups: int) -> None:
        self._coalesced.observe(lookups)

    def watch(self, figures: Callable[[], Iterable[Metric]]) -> None:
        """Add figures read at every scrape (the running gateway's cache, subscriptions)."""
        self._figures.append(figures)

    def _collect(self) -> Iterable[Metric]:
        for figures in list(self._figures):
            yield from figures()


def known_error_codes() -> list[str]:
    """The `extensions.code`s the gateway answers with that it knows of in advance: those of
    its own errors (`gateway.model.errors`, also per partition), of the query limits, of
    GraphQL over HTTP (parse, validation, bad input, internal) and of a refused request."""
    codes = _codes_below(GatewayError) | _codes_below(QueryLimitError)
    codes |= {PARSE_FAILED, VALIDATION_FAILED, BAD_USER_INPUT, INTERNAL_SERVER_ERROR}
    codes.add(RequestError.BAD_REQUEST)
    return sorted(codes)


def _codes_below(root: type[Exception]) -> set[str]:
    """The `code` and `partition_code` of `root` and of every class derived from it."""
    codes: set[str] = set()
    for name in ("code", "partition_code"):
        if hasattr(root, name):
            codes.add(getattr(root, name))
    for derived in root.__subclasses__():
        codes |= _codes_below(derived)
    return codes


def runtime_figures(
    cache_stats: dict[str, int] | None,
    subscriptions: int,
    hedged_reads: int,
    events: tuple[int, int] = (0, 0),
    routing_stale: bool = False,
) -> list[Metric]:
    """The scrape-time figures of a started gateway: its cache's counts (None: no cache),
    the subscriptions running, the hedged reads started, the subscription events pushed
    (written by a compiled writer, executed) and whether membership brings no news (the
    broker does not answer its reader: the routing table is kept as it was)."""
    figures: list[Metric] = [
        GaugeMetricFamily(
            "statefed_gateway_routing_stale",
            "1 while the broker does not answer the membership reader: routing is as it was",
            1 if routing_stale else 0,
        )
    ]
    if cache_stats is not None:
        for name, text in (
            ("hits", "Keys answered from the gateway cache"),
            ("misses", "Keys the gateway cache could not answer"),
            ("top_hits", "Top-N reads answered from the gateway cache"),
            ("refused", "Missed keys the gateway cache did not fill: not asked often enough"),
            ("skipped", "Lookups that read the nodes without looking: not every key cached"),
        ):
            figures.append(
                CounterMetricFamily(f"statefed_gateway_cache_{name}", text, cache_stats[name])
            )
        filled = CounterMetricFamily(
            "statefed_gateway_cache_filled",
            "Keys the gateway cache filled: from the node read that missed them, or by a "
            "snapshot of the followed copy",
            labels=["by"],
        )
        filled.add_metric(["read"], cache_stats["filled_from_reads"])
        filled.add_metric(["snapshot"], cache_stats["filled_by_snapshots"])
        figures.append(filled)
        figures.append(
            GaugeMetricFamily(
                "statefed_gateway_cache_entries", "Rows the cache holds", cache_stats["entries"]
            )
        )
        figures.append(
            GaugeMetricFamily(
                "statefed_gateway_cache_bytes",
                "Estimated bytes the cache holds",
                cache_stats["bytes"],
            )
        )
        figures.append(
            GaugeMetricFamily(
                "statefed_gateway_cache_whole_views",
                "Views the cache holds whole and answers any key of now",
                cache_stats["whole_views"],
            )
        )
    figures.append(
        GaugeMetricFamily(
            "statefed_gateway_subscriptions", "Subscriptions running now", subscriptions
        )
    )
    pushed = CounterMetricFamily(
        "statefed_gateway_subscription_events",
        "Subscription events pushed, by how their response was made: written by the "
        "operation's compiled writer, or executed by graphql-core",
        labels=["path"],
    )
    pushed.add_metric(["written"], events[0])
    pushed.add_metric(["executed"], events[1])
    figures.append(pushed)
    figures.append(
        CounterMetricFamily(
            "statefed_gateway_hedged_reads",
            "Standby requests started because an owner had not answered within its hedge delay",
            hedged_reads,
        )
    )
    return figures
