"""The pipeline's restart loop (`pipeline.run.run_with_restarts`): a changelog record over
Kafka's limit ends the pipeline at once, naming the record (each restart would replay the
batch that makes it), on Spark and a broker, and with the queries' start replaced by a
stand-in that fails as Spark's queries do; another failure is restarted."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession

from pipeline import PipelineConfig, run
from pipeline.errors import QueryFailedError, RecordTooLargeError
from pipeline.health import HealthFile
from pipeline.metrics import PipelineMetrics
from pipeline.sink import too_large
from runtime.kafka import KafkaProperties
from runtime.topics import ensure_topics, statefed_topics
from schema import DEMO_DOMAIN, ValueField, ViewKind
from tests.pipeline.support import PARTITIONS, pipeline_config, produce
from tooling.broker import KafkaBroker

TOO_LARGE = too_large("statefed.word_counts.changelog", b"k", 2_000_000, 1_000_000)
# how a query's failure carries the writer's exception: its Python traceback in the text
SPARK_TEXT = (
    "streaming query statefed.word_counts stopped: [FOREACH_BATCH_USER_FUNCTION_ERROR] An "
    "error occurred in the user provided function in foreach batch sink.\nTraceback (most "
    'recent call last):\n  File "pipeline/writer.py", line 80, in __call__\n'
    f"pipeline.errors.RecordTooLargeError: {TOO_LARGE}\n\tat py4j.Protocol.getReturnValue"
)


class _Starts:
    """`start_queries` failing with `failures` in turn, then setting `stop`."""

    def __init__(self, stop: threading.Event, *failures: Exception) -> None:
        self.stop = stop
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if not self.failures:
            self.stop.set()
        raise self.failures.pop(0) if self.failures else QueryFailedError("stopped")


def _run(monkeypatch: pytest.MonkeyPatch, *failures: Exception) -> tuple[_Starts, PipelineMetrics]:
    stop, metrics = threading.Event(), PipelineMetrics()
    starts = _Starts(stop, *failures)
    monkeypatch.setattr(run, "start_queries", starts)
    monkeypatch.setattr(run, "broker_answers", lambda *args: True)
    monkeypatch.setattr(run, "RESTART_BACKOFF_S", 0.0)
    config = PipelineConfig.from_env({})
    run.run_with_restarts(None, config, (), stop, HealthFile(None), metrics)  # type: ignore[arg-type]
    return starts, metrics


def test_a_record_over_kafkas_limit_ends_the_pipeline_at_once_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(RecordTooLargeError) as raised:
        _run(monkeypatch, QueryFailedError(SPARK_TEXT))
    assert str(raised.value) == TOO_LARGE
    assert isinstance(raised.value.__cause__, QueryFailedError)


def test_a_record_real_time_modes_java_producer_refuses_as_too_large_ends_it_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    java = (
        "The message is 2000088 bytes when serialized which is larger than 1048576, which "
        "is the value of the max.request.size configuration."
    )
    text = (
        "streaming query statefed.word_counts stopped: org.apache.spark.SparkException: "
        "Writing job aborted\nCaused by: org.apache.kafka.common.errors."
        f"RecordTooLargeException: {java}\n\tat org.apache.kafka.clients.producer"
    )
    with pytest.raises(RecordTooLargeError) as raised:
        _run(monkeypatch, QueryFailedError(text))
    assert str(raised.value) == java


def test_another_failure_restarts_the_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    starts, _metrics = _run(monkeypatch, QueryFailedError("a Python worker did not connect"))
    assert starts.calls == 2  # failed, restarted (and stopped)


def test_a_row_over_the_producers_limit_stops_the_pipeline_without_a_restart(
    spark: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    """A latest view's row of 5,000 bytes, with the producer's limit at 2,000."""
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    latest = next(v for v in DEMO_DOMAIN if v.kind is ViewKind.LATEST)
    view = dataclasses.replace(
        latest, name=f"big_{uuid.uuid4().hex[:8]}", topic=topic, value_fields=(ValueField("trip"),)
    )
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, [view]))
    limit = KafkaProperties.from_env({"STATEFED_KAFKA_MESSAGE_MAX_BYTES": "2000"})
    config = dataclasses.replace(pipeline_config(broker, tmp_path), kafka_properties=limit)
    value = {"trip": "x" * 5000, view.event_time_field: 1_767_225_600_000}
    produce(broker.bootstrap, topic, [b"c1"], orjson.dumps(value))
    metrics = PipelineMetrics()
    with pytest.raises(RecordTooLargeError, match=r"record of \d+ bytes .*b'c1'"):
        run.run_with_restarts(spark, config, (view,), threading.Event(), HealthFile(None), metrics)
