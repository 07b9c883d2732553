"""The driver's metrics, fed progress as Spark reports it: no Spark session and no broker.

A dead-letter counter is exported at 0 before its topic's first dead letter, the input rate
falls to 0 once a view runs no batch, and a Real-Time Mode batch's duration is told apart
second by second."""

from __future__ import annotations

import uuid
from typing import Any, cast

from pyspark.sql.streaming.listener import StreamingQueryProgress

from pipeline.metrics import PipelineMetrics
from pipeline.sink import BatchProducer
from pipeline.writers import DeadLetterWriter
from schema import ViewStatus

RATE = "statefed_pipeline_input_rows_per_second"


class _Clock:
    """Monotonic seconds the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _progress(batch: int, duration_ms: int, rate: float) -> StreamingQueryProgress:
    """A progress of a batch that ran (only the fields the metrics read matter)."""
    doc: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "name": "statefed.v",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "batchId": batch,
        "batchDuration": duration_ms,
        "durationMs": {"triggerExecution": duration_ms, "addBatch": duration_ms - 100},
        "stateOperators": [],
        "sources": [],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": 0},
        "numInputRows": 10,
        "inputRowsPerSecond": rate,
    }
    return StreamingQueryProgress.fromJson(doc)


def _ran(metrics: PipelineMetrics, batch: int, duration_ms: int = 500, rate: float = 0.0) -> None:
    metrics.batch(_progress(batch, duration_ms, rate), ViewStatus("v", batch, 0))


def test_a_topics_dead_letters_are_exported_at_0_before_its_first_one() -> None:
    """`increase()` takes a series' first sample as its start: a counter that appeared
    with its first dead letter would show no increase for it."""
    metrics = PipelineMetrics()
    unused = cast(BatchProducer, object())  # no batch runs: nothing is sent
    name, labels = "statefed_pipeline_dead_letters_total", {"topic": "words"}
    DeadLetterWriter("words", unused, metrics.dead_letters)
    assert metrics.registry.get_sample_value(name, labels) == 0
    metrics.dead_letters("words", 2)
    DeadLetterWriter("words", unused, metrics.dead_letters)  # the queries restarted
    assert metrics.registry.get_sample_value(name, labels) == 2


def test_the_input_rate_falls_to_0_once_the_view_runs_no_batch() -> None:
    clock = _Clock()
    metrics = PipelineMetrics(clock)
    _ran(metrics, 0, rate=40.0)
    clock.now = 9.5  # Spark reports a query idle after 10 s without a batch
    assert metrics.registry.get_sample_value(RATE, {"view": "v"}) == 40.0
    clock.now = 10.5
    assert metrics.registry.get_sample_value(RATE, {"view": "v"}) == 0.0
    # batches 30 s apart (a slow trigger): the rate holds for twice that between them
    clock.now = 30.0
    _ran(metrics, 1, rate=5.0)
    clock.now = 89.0
    assert metrics.registry.get_sample_value(RATE, {"view": "v"}) == 5.0
    clock.now = 91.0
    assert metrics.registry.get_sample_value(RATE, {"view": "v"}) == 0.0


def test_real_time_mode_batches_of_5_to_9_s_fall_in_buckets_a_second_apart() -> None:
    """Their checkpoint intervals are 5 to 7.5 s by default, plus a stall of up to ~1.2 s."""
    metrics = PipelineMetrics()
    for batch, seconds in enumerate((5.4, 6.3, 6.9, 7.7, 8.7)):
        _ran(metrics, batch, duration_ms=int(seconds * 1000))
    name = "statefed_pipeline_batch_duration_seconds_bucket"
    counts = {
        le: metrics.registry.get_sample_value(name, {"view": "v", "le": le})
        for le in ("5.0", "6.0", "7.0", "8.0", "9.0", "10.0")
    }
    assert counts == {"5.0": 0, "6.0": 1, "7.0": 3, "8.0": 4, "9.0": 5, "10.0": 5}
