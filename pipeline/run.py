"""`run_pipeline`: the pipeline as a process, from a fresh Spark session to a clean stop."""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from confluent_kafka import KafkaException
from pyspark.sql import SparkSession

from pipeline.checkpointlock import checkpoint_lock
from pipeline.config import PipelineConfig
from pipeline.errors import (
    DeliveryError,
    PipelineConfigError,
    QueryFailedError,
    RecordTooLargeError,
    RegistryUnavailableError,
    SourceError,
)
from pipeline.health import HealthFile
from pipeline.job import session_slots, start_queries
from pipeline.metrics import PipelineMetrics
from pipeline.session import build_session, clear_scratch
from pipeline.wire import is_version, unseen_schema_id
from runtime.kafka import KafkaConnectionError
from runtime.logs import configure_logging
from runtime.metrics import MetricsGuard, MetricsServer
from runtime.signals import set_from_handler
from runtime.topics import broker_answers
from schema import CATALOGUE, View

__all__ = ["run_pipeline", "run_with_restarts"]

log = logging.getLogger(__name__)


# A failed query is restarted (with every other query, from the checkpoints: absolute
# changelog values make the replay harmless) this many times before the pipeline gives up.
# Queries that ran for HEALTHY_RUN_S before failing start the count anew, and a failure
# while the broker does not answer is not counted: the pipeline waits for the broker.
RESTARTS = 5
RESTART_BACKOFF_S = 2.0
HEALTHY_RUN_S = 60.0
BROKER_ANSWER_S = 5.0  # how long the broker may take to answer after a failure
BROKER_POLL_S = 1.0
REGISTRY_POLL_S = 2.0  # how often a registry that did not answer is asked again
# what a query or its start fails with when Kafka misbehaves (config errors are not retried)
_RESTARTABLE = (QueryFailedError, SourceError, DeliveryError, KafkaConnectionError, KafkaException)
# a changelog record over Kafka's limit, as a failed query's text carries it (from the
# writer's Python traceback, or Real-Time Mode's Java producer): the replay of its batch
# makes the same record again
_TOO_LARGE = re.compile(r"RecordTooLarge(?:Error|Exception): ([^\n]+)")


def run_pipeline(config: PipelineConfig, catalogue: Sequence[View] = CATALOGUE) -> None:
    """Run every query of the catalogue until SIGTERM or SIGINT, then stop queries and Spark.

    Logs `statefed pipeline: ready (<n> queries)` once every query started. A
    query that fails (e.g. a Python worker that did not connect back on a loaded machine)
    restarts the queries from their checkpoints, up to RESTARTS times in a row; then its
    error is raised (a changelog record over Kafka's limit at once). While the broker does
    not answer, the pipeline waits for it instead.
    A value of a schema version registered since the start restarts the queries at once,
    reading the new version (`pipeline.wire`), and is not counted.
    """
    configure_logging("pipeline", config.log_format, config.log_level)
    # the lines of starting and stopping show at every level (a person or a script waits
    # for `ready`), as log lines so that they are JSON in JSON mode
    log.setLevel(logging.INFO)
    # before anything is touched: a second pipeline on these checkpoints is refused whole
    with checkpoint_lock(config.checkpoint_dir):
        _run(config, catalogue)


def _run(config: PipelineConfig, catalogue: Sequence[View]) -> None:
    """`run_pipeline` once its checkpoint directory is locked: metrics, Spark, the queries."""
    stop = threading.Event()
    health = HealthFile(config.health_file)
    health.clear()  # a file left by an earlier run says nothing about this one
    metrics = PipelineMetrics()
    # before Spark starts: a port in use or an unusable metrics token stops start-up at once
    server = _serve_metrics(config, metrics)
    try:
        slots = _realtime_slots(config, catalogue, stop)
        log.info("starting the Spark session of the pipeline")
        spark = build_session(config, realtime_slots=slots)
        log.info("Spark session on %s", spark.sparkContext.master)
        try:
            with _stop_on_signals(stop):
                run_with_restarts(spark, config, tuple(catalogue), stop, health, metrics)
        finally:
            health.clear()
            spark.stop()
            clear_scratch(config)
    finally:
        if server is not None:
            server.stop()
        log.info("pipeline stopped")


def _realtime_slots(
    config: PipelineConfig, catalogue: Sequence[View], stop: threading.Event
) -> int:
    """The task slots the Spark session needs for the Real-Time Mode queries (their input
    topics' partitions), waiting for the broker if it does not answer yet."""
    while True:
        try:
            return session_slots(config, catalogue)
        except SourceError as exc:
            if stop.is_set() or not _waited_for_broker(config, stop, exc):
                raise


def _serve_metrics(config: PipelineConfig, metrics: PipelineMetrics) -> MetricsServer | None:
    """/metrics of the driver when STATEFED_PIPELINE_METRICS_PORT is set, for the bearer
    token of STATEFED_METRICS_TOKEN_FILE only when that is set (ConfigError if unusable)."""
    if not config.metrics_port:
        return None
    guard = MetricsGuard(config.metrics_token_file)
    server = MetricsServer(metrics.registry, config.metrics_host, config.metrics_port, guard)
    try:
        server.start()
    except OSError as exc:
        raise PipelineConfigError(
            "STATEFED_PIPELINE_METRICS_PORT",
            f"cannot serve /metrics on {config.metrics_host}:{config.metrics_port}: {exc}",
        ) from exc
    log.info("metrics on http://%s:%d/metrics", config.metrics_host, server.port)
    return server


def run_with_restarts(
    spark: SparkSession,
    config: PipelineConfig,
    catalogue: tuple[View, ...],
    stop: threading.Event,
    health: HealthFile,
    metrics: PipelineMetrics,
) -> None:
    """Run the queries of `catalogue` in `spark` until `stop`, restarting them as
    `run_pipeline` says."""
    failures, ready = 0, False
    strays: dict[str, frozenset[int]] = {}
    while not stop.is_set():
        started = time.monotonic()
        try:
            with start_queries(spark, config, catalogue, metrics=metrics, strays=strays) as running:
                if not ready:
                    ready = True
                    log.info("statefed pipeline: ready (%d queries)", len(running.queries))
                running.wait(stop, alive=health.beat)
                log.info("stopping %d queries", len(running.queries))
                return
        except _RESTARTABLE as exc:
            health.clear()
            _raise_if_too_large(exc)
            if time.monotonic() - started >= HEALTHY_RUN_S:
                failures = 0
            if _new_schema_version(config, exc, strays, stop):
                metrics.restarted()
                continue
            if _waited_for_broker(config, stop, exc):
                metrics.restarted()
                continue
            failures += 1
            if failures > RESTARTS:
                raise
            log.warning("%s; restarting the queries (%d of %d)", exc, failures, RESTARTS)
            metrics.restarted()
            stop.wait(RESTART_BACKOFF_S * failures)


def _raise_if_too_large(failure: Exception) -> None:
    """RecordTooLargeError at once when `failure` is a record over Kafka's limit: every
    restart would replay the batch that makes it, so none is tried."""
    found = _TOO_LARGE.search(str(failure))
    if found is not None:
        raise RecordTooLargeError(found.group(1)) from failure


def _new_schema_version(
    config: PipelineConfig,
    failure: Exception,
    strays: dict[str, frozenset[int]],
    stop: threading.Event,
) -> bool:
    """If `failure` is a value whose schema id was none of its subject's versions at the
    start, return True: the restart reads the subject anew. An id that is still no version
    of the subject is added to its `strays`: its values become dead letters. While the
    registry does not answer, it waits for it (not counted as a restart), as for the
    broker: a stray value during a registry outage must not stop the pipeline."""
    unseen = unseen_schema_id(failure)
    if unseen is None:
        return False
    subject, schema_id = unseen
    try:
        registered = _ask_registry(config, subject, schema_id, stop)
    except SourceError as exc:  # it answered, but not with the subject's versions
        log.warning("%s; cannot ask the registry whether it is a new version: %s", failure, exc)
        return False  # a failure like any other: counted, retried
    if registered is None:
        return True  # stopping: the loop ends
    if registered:
        log.info(
            "subject %r has a new version (schema id %d): restarting the queries to read it",
            subject,
            schema_id,
        )
    else:
        log.warning(
            "schema id %d is no version of subject %r: its values are dead letters (or "
            "skipped, on a topic of several types)",
            schema_id,
            subject,
        )
        strays[subject] = strays.get(subject, frozenset()) | {schema_id}
    return True


def _ask_registry(
    config: PipelineConfig, subject: str, schema_id: int, stop: threading.Event
) -> bool | None:
    """Whether `schema_id` is a version of `subject`, once the registry answers; None when
    `stop` came first. SourceError when it answers without the subject's versions."""
    said = False
    while not stop.is_set():
        try:
            return is_version(config.registry_url, subject, schema_id)
        except RegistryUnavailableError as exc:
            if not said:
                log.warning(
                    "schema id %d of subject %r: cannot ask the registry whether it is a new "
                    "version (%s); waiting for it, then restarting the queries (not counted "
                    "as a restart)",
                    schema_id,
                    subject,
                    exc,
                )
                said = True
            stop.wait(REGISTRY_POLL_S)
    return None


def _waited_for_broker(config: PipelineConfig, stop: threading.Event, failure: Exception) -> bool:
    """If the broker does not answer, wait until it does (or `stop`) and return True: the
    failure was the outage's, not the queries'."""
    if broker_answers(config.kafka, BROKER_ANSWER_S):
        return False
    log.warning(
        "%s; the broker at %s does not answer: waiting for it, then restarting the queries "
        "from their checkpoints (not counted as a restart)",
        failure,
        config.bootstrap,
    )
    waited = time.monotonic()
    while not stop.wait(BROKER_POLL_S) and not broker_answers(config.kafka, BROKER_ANSWER_S):
        pass
    log.info("the broker answers again after %.0f s", time.monotonic() - waited)
    return True


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set `stop` on SIGTERM/SIGINT (handlers can only be installed in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        set_from_handler(stop)

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
