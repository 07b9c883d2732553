"""`run_pipeline`: the pipeline as a process, from a fresh Spark session to a clean stop."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from pyspark.sql import SparkSession

from pipeline.config import PipelineConfig
from pipeline.errors import QueryFailedError
from pipeline.job import start_queries
from pipeline.session import build_session
from schema import CATALOGUE, View

__all__ = ["run_pipeline"]

log = logging.getLogger(__name__)


# A failed query is restarted (with every other query, from the checkpoints: absolute
# changelog values make the replay harmless) this many times before the pipeline gives up.
RESTARTS = 5
RESTART_BACKOFF_S = 2.0


def run_pipeline(config: PipelineConfig, catalogue: Sequence[View] = CATALOGUE) -> None:
    """Run every query of the catalogue until SIGTERM or SIGINT, then stop queries and Spark.

    Prints `statefed pipeline: ready (<n> queries)` to stderr once every query started. A
    query that fails (e.g. a Python worker that did not connect back on a loaded machine)
    restarts the queries from their checkpoints, up to RESTARTS times; then the
    `QueryFailedError` is raised.
    """
    _default_logging()
    stop = threading.Event()
    log.info("starting the Spark session of the pipeline")
    spark = build_session(config)
    log.info("Spark session on %s", spark.sparkContext.master)
    try:
        with _stop_on_signals(stop):
            _run_with_restarts(spark, config, tuple(catalogue), stop)
    finally:
        spark.stop()
        log.info("pipeline stopped")


def _run_with_restarts(
    spark: SparkSession, config: PipelineConfig, catalogue: tuple[View, ...], stop: threading.Event
) -> None:
    failures = 0
    while not stop.is_set():
        try:
            with start_queries(spark, config, catalogue) as running:
                if failures == 0:
                    print(
                        f"statefed pipeline: ready ({len(running.queries)} queries)",
                        file=sys.stderr,
                        flush=True,
                    )
                running.wait(stop)
                log.info("stopping %d queries", len(running.queries))
                return
        except QueryFailedError as exc:
            failures += 1
            if failures > RESTARTS:
                raise
            log.warning("%s; restarting the queries (%d of %d)", exc, failures, RESTARTS)
            stop.wait(RESTART_BACKOFF_S * failures)


def _default_logging() -> None:
    """Progress lines on stderr, unless the embedding program configured logging itself."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
        # py4j logs every callback (each foreachBatch call) at INFO
        logging.getLogger("py4j").setLevel(logging.WARNING)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set `stop` on SIGTERM/SIGINT (handlers can only be installed in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
