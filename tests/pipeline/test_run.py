"""`python -m pipeline` as a process: ready line, every catalogue view computed, clean
stop on SIGTERM. The same run serves the driver's `/metrics` on
STATEFED_PIPELINE_METRICS_PORT and logs JSON lines (one Spark start for both claims): its
batch metrics appear, the processed offsets reach the end of the input, a record without a
key counts as a dead letter, promtool accepts the output, and its Python log lines are JSON."""

from __future__ import annotations

import functools
import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import IO, Any

import orjson
import pytest

from pipeline import check_health
from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics, statefed_topics
from schema import CATALOGUE, WORD_COUNTS, View
from tests.observe.support import promtool_check, scrape, series, total
from tests.pipeline.support import (
    PARTITIONS,
    ChangelogReader,
    RecordLog,
    end_offsets_of,
    produce,
)
from tooling.broker import KafkaBroker, free_port
from tooling.processes import wait_until

REPO = Path(__file__).resolve().parents[2]
# the JVM's own warning at start, before logging is set up (Spark adds the module)
_JVM_LAUNCHER = "WARNING: Using incubator modules"


class Lines:
    """The lines a stream produced so far, read by a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)

    def close(self) -> None:
        """Call once the process exited: the thread reads to the end, then the pipe closes."""
        self._thread.join(10)
        self.stream.close()

    def to_end(self) -> list[str]:
        """Every line, once the process exited (closes the stream)."""
        self.close()
        while not self._queue.empty():
            self.seen.append(self._queue.get_nowait())
        return self.seen

    def wait_for(self, text: str, timeout_s: float) -> str:
        def next_match() -> str | None:
            try:
                line = self._queue.get(timeout=0.5)  # the poll waits here, not in a sleep
            except queue.Empty:
                return None
            self.seen.append(line)
            return line if text in line else None

        def last_lines() -> str:
            return f"a line with {text!r}; last lines: {self.seen[-20:]}"

        return wait_until(next_match, timeout_s, last_lines, interval_s=0)


def _second_pipeline_is_refused(
    env: dict[str, str], first: int, health: Path, queries: int
) -> None:
    """A second pipeline on the running one's checkpoints stops before its Spark starts,
    naming the first, and leaves the first's health file alone."""
    second = subprocess.run(
        [sys.executable, "-m", "pipeline"],
        cwd=REPO,
        env={**env, "STATEFED_PIPELINE_METRICS_PORT": "0"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert f"STATEFED_CHECKPOINT_DIR: {env['STATEFED_CHECKPOINT_DIR']} is in use" in second.stderr
    assert f"pid {first} on" in second.stderr
    assert "starting the Spark session" not in second.stderr
    assert _healthy(health, queries)


@pytest.mark.timeout(300)
def test_the_pipeline_process_counts_and_stops_cleanly_on_sigterm(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS))
    env = {
        **os.environ,
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "STATEFED_TRIGGER_MS": "200",
        "STATEFED_PIPELINE_HEALTH_FILE": str(tmp_path / "pipeline.health"),
        "STATEFED_PIPELINE_METRICS_PORT": str(port := free_port()),
        "STATEFED_LOG_FORMAT": "json",
        "STATEFED_SPARK_LOG_LEVEL": "info",  # many of Spark's lines, all to be JSON
    }
    health = tmp_path / "pipeline.health"
    health.write_text("left by an earlier run")  # an old file does not stand for this run
    view = WORD_COUNTS
    assert view in CATALOGUE
    others = [v for v in CATALOGUE if v is not view]
    # a query per view, and a dead-letter query per input topic
    queries = len(CATALOGUE) + len({v.topic for v in CATALOGUE})
    changelog = ChangelogReader(broker.bootstrap, view.changelog_topic)
    logs = {v.name: RecordLog(broker.bootstrap, v.changelog_topic) for v in others}
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines = Lines(process.stderr)
    try:
        ready = lines.wait_for("statefed pipeline: ready", 180)
        assert f"ready ({queries} queries)" in ready
        assert any(f"query statefed.{view.name} started" in line for line in lines.seen)
        wait_until(
            functools.partial(_healthy, health, queries), 30, "the health file to say all run"
        )

        tag = uuid.uuid4().hex[:8]
        words = [f"{tag}-{i % 7}" for i in range(70)]
        produce(broker.bootstrap, view.topic, (w.encode() for w in words))
        produce(broker.bootstrap, view.topic, [b""])  # an empty key: a dead letter
        for topic in {v.topic for v in others}:  # one event every other view can read
            produce(broker.bootstrap, topic, [tag.encode()], _event_value(others))

        def counted() -> bool:
            changelog.poll()
            got = changelog.counts()
            return all(got.get(w) == n for w, n in Counter(words).items())

        wait_until(counted, 90, "the process to count this test's words", interval_s=0)
        for name, log in logs.items():
            log.wait_until(functools.partial(_has_key, log, tag), f"{name} to hold the event")
        _check_metrics(f"http://127.0.0.1:{port}", broker.bootstrap, view)
        _second_pipeline_is_refused(env, process.pid, health, queries)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        lines.wait_for("pipeline stopped", 5)
        assert not health.exists()  # a stopped pipeline is not healthy
        _check_json_logs(lines.to_end())
    finally:
        changelog.close()
        for log in logs.values():
            log.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
        lines.close()


def _check_metrics(url: str, bootstrap: str, view: View) -> None:
    """The driver's batch metrics of `view`, once its processed offsets reach the input's end.

    This test produces the only record without a key to the input topic on the shared broker,
    and the run reads it from the earliest offset with a fresh checkpoint.
    """
    end = sum(end_offsets_of(bootstrap, view.topic).values())
    labels = {"view": view.name}

    def processed() -> bool:
        samples = scrape(url)[1]
        offsets = series(samples, "statefed_pipeline_processed_offset")
        mine = [v for key, v in offsets.items() if dict(key)["view"] == view.name]
        dead = total(samples, "statefed_pipeline_dead_letters_total", topic=view.topic)
        return sum(mine) == end and dead == 1

    wait_until(processed, 60, "the metrics to show the input and the dead letter processed")
    text, samples = scrape(url)
    assert total(samples, "statefed_pipeline_batches_total", **labels) >= 1
    assert total(samples, "statefed_pipeline_batch_duration_seconds_count", **labels) >= 1
    assert total(samples, "statefed_pipeline_batch_duration_seconds_sum", **labels) > 0
    add_batch = {**labels, "phase": "addBatch"}
    assert total(samples, "statefed_pipeline_batch_phase_seconds_total", **add_batch) > 0
    assert total(samples, "statefed_pipeline_input_rows_total", **labels) == end
    assert series(samples, "statefed_pipeline_input_rows_per_second")
    assert total(samples, "statefed_pipeline_late_rows_dropped_total", **labels) == 0
    assert total(samples, "statefed_pipeline_query_restarts_total") == 0
    promtool_check(text)


def _check_json_logs(lines: list[str]) -> None:
    """The process's log lines, Python's and the driver JVM's (Spark's, through log4j2),
    are JSON of the pipeline part; only the JVM's launcher writes a line of its own."""
    launcher = [line for line in lines if line.startswith(_JVM_LAUNCHER)]
    assert len(launcher) <= 1, launcher
    logged: list[dict[str, Any]] = [orjson.loads(line) for line in lines if line not in launcher]
    assert any(line["logger"] == "pipeline.job" for line in logged), lines[-20:]
    spark = [line for line in logged if line["logger"].startswith("org.apache.spark.")]
    assert len(spark) > 100, lines[-20:]
    # what asks nothing of the operator is not said (pipeline/log4j2.properties)
    hidden = ("adaptive.enabled is not supported", "Disabling AQE", "native-hadoop")
    assert not [line for line in logged if any(h in line["message"] for h in hidden)]
    assert any(line["message"].startswith("statefed pipeline: ready (") for line in logged)
    assert {line["part"] for line in logged} == {"pipeline"}


def _healthy(health: Path, queries: int) -> bool:
    healthy, why = check_health(health, 5000, wall_clock_ms())
    return healthy and why.startswith(f"{queries} queries running")


def _event_value(views: list[View]) -> bytes:
    """A JSON value with every event time and value field these views read."""
    doc: dict[str, object] = {}
    for v in views:
        if v.event_time_field is not None:
            doc[v.event_time_field] = 1_767_225_600_000
        doc.update({f.name: "x" for f in v.value_fields})
    return orjson.dumps(doc)


def _has_key(log: RecordLog, key: str) -> bool:
    return any(orjson.loads(value)["key"] == key for _, _, value in log.records)
