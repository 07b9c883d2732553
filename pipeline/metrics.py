"""The pipeline driver's Prometheus metrics, served on STATEFED_PIPELINE_METRICS_PORT.

Fed from the same progress the status records come from (`pipeline.status`: the poller
reads each view query's `lastProgress` once per batch), so metrics cost the driver no
Spark listener and no extra call into the JVM: per view the micro-batch duration and the
seconds of each of its phases (Spark's `durationMs`), the batches and input rows, the
input rate, the input offsets processed per partition and the rows dropped as late; per
input topic the dead letters written; the query restarts.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pyspark.sql.streaming.listener import StreamingQueryProgress

from pipeline.status import dropped_by_watermark
from schema import ViewStatus

__all__ = ["PipelineMetrics"]

# seconds: a micro-batch of a count query is ~0.4-0.5 s on idle local[2]
_BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class PipelineMetrics:
    """The metrics of one pipeline run, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self._duration = Histogram(
            "statefed_pipeline_batch_duration_seconds",
            "Time Spark took for one micro-batch of a view (triggerExecution)",
            ["view"],
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self._phases = Counter(
            "statefed_pipeline_batch_phase_seconds",
            "Time a view's micro-batches spent in each phase Spark times (durationMs: "
            "latestOffset, walCommit, queryPlanning, addBatch, commitOffsets, ...)",
            ["view", "phase"],
            registry=registry,
        )
        self._batches = Counter(
            "statefed_pipeline_batches",
            "Micro-batches a view's query ran",
            ["view"],
            registry=registry,
        )
        self._rows = Counter(
            "statefed_pipeline_input_rows",
            "Input records a view's micro-batches read",
            ["view"],
            registry=registry,
        )
        self._rate = Gauge(
            "statefed_pipeline_input_rows_per_second",
            "Input records per second of a view's latest micro-batch",
            ["view"],
            registry=registry,
        )
        self._offsets = Gauge(
            "statefed_pipeline_processed_offset",
            "Next input offset per partition after a view's latest micro-batch",
            ["view", "partition"],
            registry=registry,
        )
        self._late = Counter(
            "statefed_pipeline_late_rows_dropped",
            "Rows a view's stateful operators dropped as later than the watermark",
            ["view"],
            registry=registry,
        )
        self._dead_letters = Counter(
            "statefed_pipeline_dead_letters",
            "Input records written to statefed.deadletter, by input topic",
            ["topic"],
            registry=registry,
        )
        self._restarts = Counter(
            "statefed_pipeline_query_restarts",
            "Times the queries were restarted from their checkpoints after a failure",
            registry=registry,
        )

    def batch(self, progress: StreamingQueryProgress, status: ViewStatus) -> None:
        """One micro-batch of a view's query ran (`status` is what was published of it)."""
        view = status.view
        phases = progress.durationMs or {}
        duration_ms = phases.get("triggerExecution")
        if duration_ms is not None:
            self._duration.labels(view).observe(duration_ms / 1000)
        for phase, ms in phases.items():
            if phase != "triggerExecution" and ms > 0:  # the whole batch is the histogram's
                self._phases.labels(view, phase).inc(ms / 1000)
        self._batches.labels(view).inc()
        self._rows.labels(view).inc(max(int(progress.numInputRows or 0), 0))
        rate = progress.inputRowsPerSecond
        if rate is not None and math.isfinite(rate):
            self._rate.labels(view).set(rate)
        for partition, offset in status.source_offsets.items():
            self._offsets.labels(view, str(partition)).set(offset)
        self._late.labels(view).inc(dropped_by_watermark(progress))

    def dead_letters(self, topic: str, count: int) -> None:
        self._dead_letters.labels(topic).inc(count)

    def restarted(self) -> None:
        self._restarts.inc()
