"""The streaming job: one update-mode query per view, plus one dead-letter query per input topic.

Each query has its own checkpoint directory under `config.checkpoint_dir`
(`<view name>/` and `deadletter/<topic>/`), so a restart resumes every query where its
last committed micro-batch ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from node.pipeline.config import PipelineConfig
from node.pipeline.errors import QueryFailedError
from node.pipeline.kinds import plan_for
from node.pipeline.records import keyed_events, rejected_records
from node.pipeline.sink import BatchProducer
from node.pipeline.source import SOURCE_NAME, register_source
from node.pipeline.writers import ChangelogWriter, DeadLetterWriter
from node.topics import partition_count
from schema import CATALOGUE, DEADLETTER_TOPIC, View

__all__ = ["ProducerFactory", "RunningPipeline", "default_producer", "read_topic", "start_queries"]

log = logging.getLogger(__name__)

ProducerFactory = Callable[[PipelineConfig, str], BatchProducer]


class RunningPipeline:
    """The started queries and the producers they write with; `stop()` ends both."""

    def __init__(self) -> None:
        self.queries: list[StreamingQuery] = []
        self._producers: list[BatchProducer] = []

    def add(self, query: StreamingQuery, producer: BatchProducer) -> None:
        self.queries.append(query)
        self._producers.append(producer)

    def check(self) -> None:
        """Raise `QueryFailedError` if a query is no longer running."""
        for query in self.queries:
            if not query.isActive:
                raise QueryFailedError(f"streaming query {query.name} stopped: {query.exception()}")

    def wait(self, stop: threading.Event, poll_s: float = 0.5) -> None:
        """Block until `stop` is set; raise `QueryFailedError` as soon as a query fails."""
        while not stop.wait(poll_s):
            self.check()

    def stop(self) -> None:
        for query in self.queries:
            query.stop()
        for producer in self._producers:
            producer.close()
        self.queries, self._producers = [], []

    def __enter__(self) -> RunningPipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def read_topic(spark: SparkSession, config: PipelineConfig, topic: str) -> DataFrame:
    """The raw stream of `topic` (Kafka connector columns) from the configured source."""
    if config.source_format == "kafka":
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.bootstrap)
            .option("subscribe", topic)
        )
    else:
        reader = (
            spark.readStream.format(SOURCE_NAME)
            .option("bootstrap", config.bootstrap)
            .option("topic", topic)
            .option("readTasks", str(config.read_tasks))
            .option("readTimeoutMs", str(config.read_timeout_ms))
        )
    reader = reader.option("startingOffsets", config.starting_offsets)
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    return reader.load()


def default_producer(config: PipelineConfig, client_id: str) -> BatchProducer:
    """The producer a query writes with: to `config.bootstrap`."""
    return BatchProducer(config.bootstrap, client_id, config.delivery_timeout_ms / 1000)


def start_queries(
    spark: SparkSession,
    config: PipelineConfig,
    catalogue: Iterable[View] = CATALOGUE,
    producer: ProducerFactory = default_producer,
) -> RunningPipeline:
    """Start every query of `catalogue` in `spark`; on an error, stop the ones started.

    `producer` makes each query's producer (a seam: tests inject one that cannot deliver).
    """
    register_source(spark)
    views = list(catalogue)
    running = RunningPipeline()
    try:
        for view in views:
            running.add(*_start_view(spark, config, view, producer))
        for topic in dict.fromkeys(v.topic for v in views):
            running.add(*_start_dead_letters(spark, config, topic, producer))
    except BaseException:
        running.stop()
        raise
    return running


def _start_view(
    spark: SparkSession, config: PipelineConfig, view: View, make_producer: ProducerFactory
) -> tuple[StreamingQuery, BatchProducer]:
    plan = plan_for(view)
    partition_count(config.bootstrap, view.topic)  # fail now, naming the topic, if missing
    partitions = partition_count(config.bootstrap, view.changelog_topic)
    producer = make_producer(config, f"statefed-pipeline-{view.name}")
    rows = plan.aggregate(keyed_events(read_topic(spark, config, view.topic)))
    writer = rows.writeStream.outputMode("update").foreachBatch(
        ChangelogWriter(view, plan, producer, partitions)
    )
    name = f"statefed.{view.name}"
    query = _start(writer, config, name, config.checkpoint_dir / view.name, producer)
    log.info("query %s started: %s -> %s", name, view.topic, view.changelog_topic)
    return query, producer


def _start_dead_letters(
    spark: SparkSession, config: PipelineConfig, topic: str, make_producer: ProducerFactory
) -> tuple[StreamingQuery, BatchProducer]:
    partition_count(config.bootstrap, DEADLETTER_TOPIC)  # fail early if it is missing
    producer = make_producer(config, f"statefed-pipeline-deadletter-{topic}")
    rejected = rejected_records(read_topic(spark, config, topic))
    writer = rejected.writeStream.outputMode("append").foreachBatch(
        DeadLetterWriter(topic, producer)
    )
    name = f"statefed.deadletter.{topic}"
    query = _start(writer, config, name, config.checkpoint_dir / "deadletter" / topic, producer)
    log.info("query %s started: %s -> %s", name, topic, DEADLETTER_TOPIC)
    return query, producer


def _start(
    writer: DataStreamWriter,
    config: PipelineConfig,
    name: str,
    checkpoint: Path,
    producer: BatchProducer,
) -> StreamingQuery:
    writer = writer.queryName(name).option("checkpointLocation", str(checkpoint.absolute()))
    if config.trigger_ms:
        writer = writer.trigger(processingTime=f"{config.trigger_ms} milliseconds")
    try:
        return writer.start()
    except BaseException:
        producer.close()
        raise
