"""A node's Prometheus metrics, served at `/metrics` (`runtime.metrics`).

Only the request latency is updated per request (one observation of a
`runtime.metrics.LoopHistogram`, without locks, from the event loop). Everything
else is read from the partition registry when Prometheus scrapes, so the materializer's
apply loop does no work for metrics: per view, partition and role the applied offset, the
end offset and the lag (a STANDBY copy's lag is the standby lag); per partition and role the
lag `cluster` and `/health` show, the restore progress and whether the store fails writes;
the store reads and failed writes counted by the registry (per partition, from 0 for each
partition held, so the first failure is an increase Prometheus sees); the node's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from node.changelog.partitions import PartitionRegistry
from runtime.metrics import Collected, LoopHistogram
from schema import NodeState, View

__all__ = ["NodeMetrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_COPY = ["partition", "role"]
_VIEW_COPY = ["view", "partition", "role"]


class NodeMetrics:
    """The metrics of one node app, in their own registry, read from `partitions`."""

    def __init__(self, partitions: PartitionRegistry, catalogue: Sequence[View]) -> None:
        self.registry = CollectorRegistry()
        self._partitions = partitions
        self._views = {view.changelog_topic: view.name for view in catalogue}
        self._requests = LoopHistogram(
            "statefed_node_request_duration_seconds",
            "Time to answer one /graphql request",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        ).labels()
        self.registry.register(Collected(self._collect))

    def answered(self, seconds: float) -> None:
        self._requests.observe(seconds)

    def _collect(self) -> Iterable[Metric]:
        yield from self._offsets()
        yield from self._copies()
        reads = CounterMetricFamily(
            "statefed_node_store_reads", "Reads of a held partition copy's store"
        )
        reads.add_metric([], self._partitions.reads)
        yield reads
        errors = CounterMetricFamily(
            "statefed_node_store_errors",
            "Failed writes (or reopens) of a partition's store, while applying is paused",
            labels=["partition"],
        )
        counted = dict(self._partitions.store_errors)  # a copy: the apply loop adds to it
        for partition in sorted(counted.keys() | self._partitions.partitions()):
            errors.add_metric([str(partition)], counted.get(partition, 0))
        yield errors
        state = GaugeMetricFamily(
            "statefed_node_state", "1 for the node's current state", labels=["state"]
        )
        current = self._partitions.state
        for each in NodeState:
            state.add_metric([each.value], 1 if each is current else 0)
        yield state

    def _offsets(self) -> Iterable[Metric]:
        applied = GaugeMetricFamily(
            "statefed_node_applied_offset",
            "Next changelog offset the copy applies",
            labels=_VIEW_COPY,
        )
        end = GaugeMetricFamily(
            "statefed_node_end_offset",
            "Changelog end offset (high watermark) from the copy's latest fetch",
            labels=_VIEW_COPY,
        )
        lag = GaugeMetricFamily(
            "statefed_node_view_lag_records",
            "Changelog records the copy has not applied yet",
            labels=_VIEW_COPY,
        )
        for copy in self._partitions.offsets():
            for topic, offset in sorted(copy.applied.items()):
                labels = [self._views.get(topic, topic), str(copy.partition), copy.role.value]
                high = max(copy.end.get(topic, -1), offset)
                applied.add_metric(labels, offset)
                end.add_metric(labels, high)
                lag.add_metric(labels, high - offset)
        return (applied, end, lag)

    def _copies(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily(
            "statefed_node_lag_records",
            "Records the copy is behind over all its changelogs (the lag `cluster` shows)",
            labels=_COPY,
        )
        restoring = GaugeMetricFamily(
            "statefed_node_restoring", "1 while the copy catches up after attaching", labels=_COPY
        )
        done = GaugeMetricFamily(
            "statefed_node_restore_done_records",
            "Records caught up since the copy started restoring",
            labels=_COPY,
        )
        target = GaugeMetricFamily(
            "statefed_node_restore_target_records",
            "Records the restoring copy has to catch up (0 until known)",
            labels=_COPY,
        )
        failing = GaugeMetricFamily(
            "statefed_node_store_failing", "1 while the copy's store fails writes", labels=_COPY
        )
        unknown = GaugeMetricFamily(
            "statefed_node_lag_unknown",
            "1 while the broker does not answer the copy's fetches: its lag is the last known",
            labels=_COPY,
        )
        for status in self._partitions.statuses():
            labels = [str(status.partition), status.role.value]
            lag.add_metric(labels, status.lag)
            restoring.add_metric(labels, 1 if status.restoring else 0)
            done.add_metric(labels, status.restore_done)
            target.add_metric(labels, status.restore_total)
            failing.add_metric(labels, 0 if status.store_error is None else 1)
            unknown.add_metric(labels, 0 if status.lag_unknown_since_ms is None else 1)
        return (lag, restoring, done, target, failing, unknown)
