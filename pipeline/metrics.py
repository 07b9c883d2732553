"""The pipeline driver's Prometheus metrics, served on STATEFED_PIPELINE_METRICS_PORT.

Fed from the same progress the status records come from (`pipeline.status`: the poller
reads each view query's `lastProgress` once per batch), so metrics cost the driver no
Spark listener and no extra call into the JVM: per view the micro-batch duration and the
seconds of each of its phases (Spark's `durationMs`), the batches and input rows, the
input rate, the input offsets processed per partition and the rows dropped as late; per
input topic the dead letters written; the query restarts.

The poller hears only of batches that ran, so the input rate is read at scrape time: the
latest batch's, or 0 once the view has run none for as long as Spark waits before it
reports a query idle (`spark.sql.streaming.noDataProgressEventInterval`, 10 s), or for
twice the time between its last two batches when that is longer (a slow trigger, a long
Real-Time Mode checkpoint interval): a view whose input stopped does not show its last rate
for ever.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from pyspark.sql.streaming.listener import StreamingQueryProgress

from pipeline.status import dropped_by_watermark
from runtime.metrics import Collected
from schema import ViewStatus

__all__ = ["PipelineMetrics"]

# seconds: a micro-batch of a count query is ~0.4-0.5 s on idle local[2]; a Real-Time Mode
# batch lasts its checkpoint interval (5 to 7.5 s by default) plus a stall of up to ~1.2 s,
# so 5 to 10 s go by seconds; 15 and 20 s hold a longer interval's batches
_BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 6, 7, 8, 9, 10, 15, 20, 30, 60, 120)
# Spark's noDataProgressEventInterval: how long it waits before it reports a query idle
_IDLE_AFTER_S = 10.0


@dataclass(frozen=True)
class _Rate:
    """A view's input rate as its latest batch measured it, when that batch was reported
    and how long after the one before it (monotonic seconds; 0: the first batch)."""

    per_second: float
    at: float
    gap: float

    def now(self, now: float) -> float:
        """The rate at `now`: 0 once no batch came for 10 s, or for twice the last gap
        between batches when that is longer."""
        quiet = max(_IDLE_AFTER_S, 2 * self.gap)
        return self.per_second if now - self.at <= quiet else 0.0


class PipelineMetrics:
    """The metrics of one pipeline run, in their own registry; `clock` (seconds, monotonic)
    tells when a view's input rate has gone idle."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._rates: dict[str, _Rate] = {}
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
        registry.register(Collected(self._collect))

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
        self._took_rate(view, progress.inputRowsPerSecond)
        for partition, offset in status.source_offsets.items():
            self._offsets.labels(view, str(partition)).set(offset)
        self._late.labels(view).inc(dropped_by_watermark(progress))

    def dead_letters(self, topic: str, count: int) -> None:
        """`count` more dead letters of input `topic` (0 exports its counter from the start)."""
        self._dead_letters.labels(topic).inc(count)

    def restarted(self) -> None:
        self._restarts.inc()

    def _took_rate(self, view: str, rate: float | None) -> None:
        """A batch of `view` ran, measuring `rate` (None or NaN: the last rate holds)."""
        now, last = self._clock(), self._rates.get(view)
        if rate is None or not math.isfinite(rate):
            rate = 0.0 if last is None else last.per_second
        gap = 0.0 if last is None else now - last.at
        self._rates[view] = _Rate(rate, now, gap)

    def _collect(self) -> Iterable[Metric]:
        rate = GaugeMetricFamily(
            "statefed_pipeline_input_rows_per_second",
            "Input records per second of a view's latest micro-batch, 0 once the view is idle",
            labels=["view"],
        )
        now = self._clock()
        for view, latest in sorted(dict(self._rates).items()):  # a copy: the poller adds
            rate.add_metric([view], latest.now(now))
        yield rate
