"""The streaming job: one query per view, plus one dead-letter query per input topic.

A view's query runs in its kind's output mode (update, or append for history) and
publishes the view's status after every micro-batch, or every checkpoint of a Real-Time
Mode query (see status.py, modes.py). Each query has its own checkpoint directory under
`config.checkpoint_dir` (`<view name>/`, `realtime/<view name>/` and
`deadletter/<topic>/`), so a restart resumes every query where its last committed
micro-batch or checkpoint ended. Spark cannot resume a micro-batch checkpoint in
Real-Time Mode, nor the other way round, so a view keeps the mode its checkpoint was
written in (see `checkpoint_mode`).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from pipeline.avro import AvroSchemas
from pipeline.config import PipelineConfig
from pipeline.errors import PipelineConfigError, QueryFailedError, SourceError
from pipeline.jsonschema import JsonSchemas
from pipeline.kinds import plan_for
from pipeline.metrics import PipelineMetrics
from pipeline.modes import realtime_slots, runs_realtime
from pipeline.protobuf import ProtobufSchemas
from pipeline.records import Decoding, keyed_events, rejected_records
from pipeline.sink import BatchProducer
from pipeline.starting import start_initialized, start_together
from pipeline.stateshape import check_state_shape, has_commits
from pipeline.status import ChangelogEnds, StatusPoller, ViewTracker, changelog_ends
from pipeline.statuslog import StatusPublisher, read_last_statuses
from pipeline.where import where_applied
from pipeline.wire import RegisteredSchemas
from pipeline.writers import ChangelogWriter, DeadLetterWriter
from runtime.clock import Clock, wall_clock_ms
from runtime.topics import ensure_topics, partition_count
from schema import CATALOGUE, DEADLETTER_TOPIC, PIPELINE_TOPIC, PipelineMode, ValueFormat, View

__all__ = [
    "ProducerFactory",
    "RunningPipeline",
    "checkpoint_mode",
    "default_producer",
    "read_topic",
    "realtime_views",
    "require_topic",
    "session_slots",
    "sink_options",
    "source_options",
    "start_queries",
]

log = logging.getLogger(__name__)

ProducerFactory = Callable[[PipelineConfig, str], BatchProducer]


class Closing(Protocol):
    """What a query's status reads its changelog offsets from, closed when it stops: its
    producer (micro-batches) or a `ChangelogEnds` (Real-Time Mode)."""

    def close(self) -> None: ...


# a started query, what it owns, and the tracker of a view query's statuses
Started = tuple[StreamingQuery, Closing] | tuple[StreamingQuery, Closing, ViewTracker]


class RunningPipeline:
    """The started queries, the producers or offset readers their statuses read and the
    status poller; `stop()` ends them all, after the last status of each view query is
    published."""

    def __init__(self, poller: StatusPoller) -> None:
        self.poller = poller
        self.queries: list[StreamingQuery] = []
        self._owned: list[Closing] = []
        self._stopped = False

    def add(
        self, query: StreamingQuery, owned: Closing, tracker: ViewTracker | None = None
    ) -> None:
        """Own `query`, what it `owned` (closed after its last status) and the `tracker`
        that publishes its statuses."""
        self.queries.append(query)
        self._owned.append(owned)
        if tracker is not None:
            self.poller.watch(query, tracker)

    def check(self) -> None:
        """Raise `QueryFailedError` if a query is no longer running."""
        for query in self.queries:
            if not query.isActive:
                raise QueryFailedError(f"streaming query {query.name} stopped: {query.exception()}")

    def wait(
        self,
        stop: threading.Event,
        poll_s: float = 0.5,
        alive: Callable[[int], None] = lambda queries: None,
    ) -> None:
        """Block until `stop` is set; raise `QueryFailedError` as soon as a query fails.
        `alive(number of queries)` is called after each check that found all running."""
        while not stop.wait(poll_s):
            self.check()
            alive(len(self.queries))

    def stop(self) -> None:
        """Stop every query, publish their last statuses, close what they owned (once)."""
        if self._stopped:
            return
        self._stopped = True
        self.poller.stop()
        for query in self.queries:
            query.stop()
        try:
            self.poller.poll()  # the batches that ended since the last poll
        finally:
            self.poller.publisher.close()
            for owned in self._owned:
                owned.close()
        self.queries, self._owned = [], []

    def __enter__(self) -> RunningPipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# How long the broker may hold a fetch of a micro-batch's Kafka source that finds no new
# record (the Java client's `fetch.max.wait.ms`, 500 by default). After each poll the
# client sends the next fetch ahead; at the end of a batch's range it finds nothing and
# the broker holds it, and the offset-range lookup Spark makes next waits behind it on the
# same connection: 300-500 ms a task where the input is quiet (the demo's 1 event a second:
# 4.7 s of `addBatch` a micro-batch, 1.3 s with 10 ms). A micro-batch reads only offsets
# that exist, so nothing waits for a record. Real-Time Mode polls without end and keeps it.
MICRO_BATCH_FETCH_WAIT_MS = 10


def source_options(config: PipelineConfig, topic: str, realtime: bool = False) -> dict[str, str]:
    """The options of Spark's Kafka source reading `topic`: the user's Kafka settings as
    `kafka.<key>` in the Java client's names (TLS, SASL), where to start, the cap of a
    micro-batch (which Real-Time Mode, having none, refuses)."""
    options = {
        # A leader that dies would hold the driver's offset lookups for the Java client's
        # 60 s API timeout; Spark retries a failed lookup with a fresh client, so fail fast.
        # The user's own settings (connector_options) win over these two. The fetch wait
        # is the Java client's key alone (librdkafka's is another), so no user setting
        # reaches it.
        "kafka.request.timeout.ms": "5000",
        "kafka.default.api.timeout.ms": "10000",
        **({} if realtime else {"kafka.fetch.max.wait.ms": str(MICRO_BATCH_FETCH_WAIT_MS)}),
        **config.kafka.connector_options(),
        "subscribe": topic,
        "startingOffsets": config.starting_offsets,
        # a record gone before it was read (retention, a recreated topic) fails the query
        # instead of leaving a view silently short
        "failOnDataLoss": "true",
        "kafkaConsumer.pollTimeoutMs": str(config.read_timeout_ms),
    }
    if config.max_offsets_per_trigger and not realtime:
        options["maxOffsetsPerTrigger"] = str(config.max_offsets_per_trigger)
    return options


def read_topic(
    spark: SparkSession, config: PipelineConfig, topic: str, realtime: bool = False
) -> DataFrame:
    """The raw stream of `topic`: the connector's columns (key, value, topic, partition,
    offset, timestamp, timestampType); `realtime`: for a Real-Time Mode query."""
    options = source_options(config, topic, realtime)
    return spark.readStream.format("kafka").options(**options).load()


def require_topic(config: PipelineConfig, topic: str, reader: str) -> int:
    """The partition count of `topic`; `SourceError` naming it and the settings to check
    if the broker has no such topic (Spark's source would wait for it without a word)."""
    try:
        return partition_count(config.kafka, topic)
    except RuntimeError as exc:
        raise SourceError(
            f"{reader} reads topic {topic}, which the Kafka cluster at {config.bootstrap} "
            f"does not have: check STATEFED_BOOTSTRAP, and the catalogue's topic names "
            f"(STATEFED_CATALOGUE); topics are not created on first use, so create it "
            f"(`statefed topics`) ({exc})"
        ) from exc


def default_producer(config: PipelineConfig, client_id: str) -> BatchProducer:
    """The producer a query writes with: to `config.kafka`."""
    return BatchProducer(config.kafka, client_id, config.delivery_timeout_ms / 1000)


def start_queries(
    spark: SparkSession,
    config: PipelineConfig,
    catalogue: Iterable[View] = CATALOGUE,
    producer: ProducerFactory = default_producer,
    clock: Clock = wall_clock_ms,
    metrics: PipelineMetrics | None = None,
    strays: Mapping[str, frozenset[int]] | None = None,
) -> RunningPipeline:
    """Start every query of `catalogue` in `spark`; on an error, stop the ones started.

    `producer` makes each query's producer (a seam: tests inject one that cannot deliver);
    `clock` stamps the status records (ms since the epoch; default: the wall clock);
    `metrics` is told of every batch and dead letter; `strays` are the schema ids, by
    subject, known to be none of its versions (`pipeline.wire`).
    """
    views = list(catalogue)
    decodings = _decodings(config, views, strays or {})
    ensure_topics(config.kafka, {PIPELINE_TOPIC: 1})
    trackers = _trackers(config, views, clock)
    publisher = StatusPublisher(config.kafka, config.delivery_timeout_ms / 1000)
    on_batch = None if metrics is None else metrics.batch
    running = RunningPipeline(StatusPoller(publisher, on_batch=on_batch))
    realtime = realtime_views(config, views)
    intervals = realtime_intervals(config, [v.name for v in views if v.name in realtime])
    starts: list[Callable[[], Started]] = []
    for view in views:
        tracker, decoding = trackers[view.name], decodings[view.name]
        if view.name in realtime:
            every = intervals[view.name]
            starts.append(
                functools.partial(
                    _start_realtime_view, spark, config, view, decoding, tracker, every
                )
            )
        else:
            starts.append(
                functools.partial(_start_view, spark, config, view, decoding, producer, tracker)
            )
    for topic, of_topic in _decodings_by_topic(views, decodings).items():
        starts.append(
            functools.partial(
                _start_dead_letters, spark, config, topic, of_topic, producer, metrics
            )
        )
    try:
        start_together(starts, lambda started: running.add(*started))
        running.poller.start()
    except BaseException:
        running.stop()
        raise
    return running


def realtime_views(config: PipelineConfig, views: Iterable[View]) -> frozenset[str]:
    """The names of the views whose queries run in Real-Time Mode: where Spark can run
    them and their settings ask for it (`modes.runs_realtime`), unless the checkpoint they
    resume from was written in micro-batches (`checkpoint_mode`)."""
    names = set()
    for view in views:
        realtime = runs_realtime(view, config.pipeline_mode)
        wanted = PipelineMode.REAL_TIME if realtime else PipelineMode.MICRO_BATCH
        if checkpoint_mode(config, view, wanted) is PipelineMode.REAL_TIME:
            names.add(view.name)
    return frozenset(names)


def realtime_intervals(config: PipelineConfig, names: Sequence[str]) -> dict[str, int]:
    """The checkpoint interval (ms) of each Real-Time Mode query, by view name (`names` in
    catalogue order): the first checkpoints every STATEFED_REALTIME_CHECKPOINT_MS, each
    next one 1/(2n) of that less often (the last 1.5x less often, at most). A checkpoint
    stalls its query while Spark commits, plans and starts the next batch; queries started
    together on one interval stall together and share the cores while they do (a stall
    of 0.8-1.2 s in the bench on 2 cores), where spread intervals drift apart (0.4-0.7 s)."""
    base = config.realtime_checkpoint_ms
    step = base // (2 * len(names)) if names else 0
    return {name: base + k * step for k, name in enumerate(names)}


def checkpoint_mode(config: PipelineConfig, view: View, wanted: PipelineMode) -> PipelineMode:
    """The mode `view` runs in: `wanted`, unless its checkpoint of the other mode has
    commits. Then a view whose `pipeline_mode` is `auto` keeps that mode (Spark cannot
    switch a checkpoint), and one that names a mode is a `PipelineConfigError` naming the
    checkpoint to delete: the view is then computed anew from STATEFED_STARTING_OFFSETS."""
    other = PipelineMode.MICRO_BATCH if wanted is PipelineMode.REAL_TIME else PipelineMode.REAL_TIME
    if not has_commits(_checkpoint(config, view, other)):
        return wanted
    if view.pipeline_mode is PipelineMode.AUTO:
        log.info(
            "view %s runs in %s mode, as its checkpoint %s was written (to switch: stop "
            "the pipeline and delete it)",
            view.name,
            other.value,
            _checkpoint(config, view, other),
        )
        return other
    raise PipelineConfigError(
        f"view {view.name}",
        f"its pipeline_mode is {wanted.value}, but its checkpoint "
        f"{_checkpoint(config, view, other)} was written in {other.value} mode, which Spark "
        f"cannot resume in another: delete it (the view is computed anew from "
        f"STATEFED_STARTING_OFFSETS), or set pipeline_mode={other.name}",
    )


def _checkpoint_location(checkpoint: Path) -> str:
    """Spark's `checkpointLocation` of the directory `checkpoint`: on the file system of its
    path (`file:`), never on Hadoop's default one (`fs.defaultFS`, perhaps HDFS), where
    statefed's lock, scratch files and commit checks would not be, and whose rename the
    checkpoint file manager statefed sets (`pipeline.session`) does not suit."""
    return f"file://{checkpoint.absolute()}"  # file:///x; a path of //x stays one too


def _checkpoint(config: PipelineConfig, view: View, mode: PipelineMode) -> Path:
    if mode is PipelineMode.REAL_TIME:
        return config.checkpoint_dir / "realtime" / view.name
    return config.checkpoint_dir / view.name


def session_slots(config: PipelineConfig, views: Iterable[View]) -> int:
    """The task slots the Spark session needs beside its 2 for the Real-Time Mode queries
    of `views`: the slots they hold (`modes.realtime_slots`), and as many again as the
    micro-batch queries beside them (views and dead letters) may run at once, so that a
    Real-Time Mode query starting its next checkpoint always finds its slots free (Spark
    fails it with CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT otherwise). 0 without any."""
    views = list(views)
    realtime = realtime_views(config, views)
    if not realtime:
        return 0
    readers = {v.topic: f"view {v.name}" for v in views}  # one lookup per topic
    partitions = {topic: require_topic(config, topic, reader) for topic, reader in readers.items()}
    held = realtime_slots(
        [partitions[v.topic] for v in views if v.name in realtime], config.shuffle_partitions
    )
    batches = [partitions[v.topic] for v in views if v.name not in realtime]
    batches += list(partitions.values())  # a dead-letter query per input topic
    return held + sum(max(p, config.shuffle_partitions) for p in batches)


def _trackers(config: PipelineConfig, views: list[View], clock: Clock) -> dict[str, ViewTracker]:
    """A status tracker per view; a view whose kind drops late events, resuming from its
    checkpoint, continues the `late_dropped` total of its last published status."""
    resuming = [
        v.name
        for v in views
        if plan_for(v).drops_late and has_commits(config.checkpoint_dir / v.name)
    ]
    last = read_last_statuses(config.kafka, resuming, config.read_timeout_ms / 1000)
    return {
        v.name: ViewTracker(
            v.name, v.topic, last[v.name].late_dropped if v.name in last else 0, clock
        )
        for v in views
    }


# how the schemas of each registry format are read from the Schema Registry
_REGISTERED: dict[ValueFormat, Callable[[str, str, str, frozenset[int]], RegisteredSchemas]] = {
    ValueFormat.AVRO: AvroSchemas.fetch,
    ValueFormat.JSON_SCHEMA: JsonSchemas.fetch,
    ValueFormat.PROTOBUF: ProtobufSchemas.fetch,
}


def _decodings(
    config: PipelineConfig, views: list[View], strays: Mapping[str, frozenset[int]]
) -> dict[str, Decoding]:
    """How each view reads its topic's records: the schemas of a registry format are read
    from the Schema Registry now, once per subject, and fixed for the run."""
    schemas: dict[tuple[ValueFormat, str], RegisteredSchemas] = {}
    decodings = {}
    for view in views:
        registered = None
        fetch = _REGISTERED.get(view.value_format)
        if fetch is not None:
            subject = (view.value_format, view.subject)
            if subject not in schemas:
                reader, known_strays = f"view {view.name}", strays.get(view.subject, frozenset())
                schemas[subject] = fetch(config.registry_url, view.subject, reader, known_strays)
            registered = schemas[subject]
        decodings[view.name] = Decoding.of(
            view, registered, plan_for(view).deletes, config.max_ahead_ms
        )
    return decodings


def _decodings_by_topic(
    views: list[View], decodings: dict[str, Decoding]
) -> dict[str, list[Decoding]]:
    """The distinct decodings of each input topic's views, in catalogue order."""
    by_topic: dict[str, list[Decoding]] = {}
    for view in views:
        of_topic = by_topic.setdefault(view.topic, [])
        if decodings[view.name] not in of_topic:
            of_topic.append(decodings[view.name])
    return by_topic


def _start_view(
    spark: SparkSession,
    config: PipelineConfig,
    view: View,
    decoding: Decoding,
    make_producer: ProducerFactory,
    tracker: ViewTracker,
) -> tuple[StreamingQuery, BatchProducer, ViewTracker]:
    plan = plan_for(view)
    require_topic(config, view.topic, f"view {view.name}")
    partitions = partition_count(config.kafka, view.changelog_topic)
    # read before this run writes: every status names what earlier runs wrote too (their
    # last status may be lost with a killed driver, or beyond a gateway's tail)
    written = changelog_ends(config.kafka, view.changelog_topic)
    producer = make_producer(config, f"statefed-pipeline-{view.name}")
    producer.delivered_from(view.changelog_topic, written)
    tracker.changelog_offsets = functools.partial(producer.delivered, view.changelog_topic)
    events = where_applied(keyed_events(read_topic(spark, config, view.topic), decoding), view)
    writer = (
        plan.aggregate(events, view)
        .writeStream.outputMode(plan.output_mode(view))
        .foreachBatch(ChangelogWriter(view, plan, producer, partitions))
    )
    name = f"statefed.{view.name}"
    checkpoint = _checkpoint(config, view, PipelineMode.MICRO_BATCH)
    check_state_shape(view, checkpoint)
    query = _start(writer, config.trigger_ms, name, checkpoint, producer)
    log.info("query %s started: %s -> %s", name, view.topic, view.changelog_topic)
    return query, producer, tracker


def sink_options(config: PipelineConfig, view: View) -> dict[str, str]:
    """The options of Spark's Kafka sink writing `view`'s changelog: every record
    acknowledged by all replicas within STATEFED_DELIVERY_TIMEOUT_MS and sent at once
    (the Java producer wants its request timeout within the delivery timeout), then the
    user's Kafka settings as `kafka.<key>` (TLS, SASL), which win."""
    options = {
        "kafka.acks": "all",
        "kafka.linger.ms": "0",
        "kafka.delivery.timeout.ms": str(config.delivery_timeout_ms),
        "kafka.request.timeout.ms": str(min(config.delivery_timeout_ms, 30_000)),
        **config.kafka.connector_options(),
        "topic": view.changelog_topic,
    }
    # librdkafka's record limit (STATEFED_KAFKA_MESSAGE_MAX_BYTES) is max.request.size to
    # the Java producer, which ignores a message.max.bytes
    limit = options.pop("kafka.message.max.bytes", None)
    if limit is not None:
        options.setdefault("kafka.max.request.size", limit)
    return options


def _start_realtime_view(
    spark: SparkSession,
    config: PipelineConfig,
    view: View,
    decoding: Decoding,
    tracker: ViewTracker,
    interval_ms: int,
) -> tuple[StreamingQuery, ChangelogEnds, ViewTracker]:
    """`view`'s query in Real-Time Mode: each record through the view's plan as it arrives,
    its changelog records written by Spark's Kafka sink; the status of each checkpoint
    names the changelog's ends read after it (see `ChangelogEnds`)."""
    plan = plan_for(view)
    assert plan.records is not None, f"view {view.name} cannot run in Real-Time Mode"
    require_topic(config, view.topic, f"view {view.name}")
    ends = ChangelogEnds(config.kafka, view.changelog_topic)
    tracker.changelog_offsets = ends
    raw = read_topic(spark, config, view.topic, realtime=True)
    events = where_applied(keyed_events(raw, decoding), view)
    name = f"statefed.{view.name}"
    checkpoint = _checkpoint(config, view, PipelineMode.REAL_TIME)
    check_state_shape(view, checkpoint)
    writer = (
        plan.records(plan.aggregate(events, view))
        .writeStream.format("kafka")
        .outputMode("update")
        .options(**sink_options(config, view))
        .queryName(name)
        .option("checkpointLocation", _checkpoint_location(checkpoint))
    )
    every = f"{interval_ms} milliseconds"
    writer = writer.trigger(realTime=every)  # type: ignore[call-overload]  # not in 4.3's stubs
    query = start_initialized(writer, name)  # `ends` holds no client before its first call
    log.info(
        "query %s started in Real-Time Mode: %s -> %s, a checkpoint every %d ms",
        name,
        view.topic,
        view.changelog_topic,
        interval_ms,
    )
    return query, ends, tracker


def _start_dead_letters(
    spark: SparkSession,
    config: PipelineConfig,
    topic: str,
    decodings: list[Decoding],
    make_producer: ProducerFactory,
    metrics: PipelineMetrics | None = None,
) -> tuple[StreamingQuery, BatchProducer]:
    require_topic(config, topic, f"the dead-letter query of {topic}")
    partition_count(config.kafka, DEADLETTER_TOPIC)  # fail early if it is missing
    producer = make_producer(config, f"statefed-pipeline-deadletter-{topic}")
    rejected = rejected_records(read_topic(spark, config, topic), decodings)
    writer = rejected.writeStream.outputMode("append").foreachBatch(
        DeadLetterWriter(topic, producer, None if metrics is None else metrics.dead_letters)
    )
    name = f"statefed.deadletter.{topic}"
    checkpoint = config.checkpoint_dir / "deadletter" / topic
    query = _start(writer, config.deadletter_trigger_ms, name, checkpoint, producer)
    log.info("query %s started: %s -> %s", name, topic, DEADLETTER_TOPIC)
    return query, producer


def _start(
    writer: DataStreamWriter,
    trigger_ms: int,
    name: str,
    checkpoint: Path,
    producer: BatchProducer,
) -> StreamingQuery:
    writer = writer.queryName(name).option("checkpointLocation", _checkpoint_location(checkpoint))
    if trigger_ms:
        writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    try:
        return start_initialized(writer, name)
    except BaseException:
        producer.close()
        raise
