"""`python -m pipeline` as a process: ready line, every catalogue view computed, clean
stop on SIGTERM."""

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
from typing import IO

import orjson
import pytest

from pipeline import check_health
from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics, statefed_topics
from schema import CATALOGUE, WORD_COUNTS, View
from tests.pipeline.support import PARTITIONS, ChangelogReader, RecordLog, produce
from tooling.broker import EmbeddedBroker
from tooling.processes import wait_until

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.timeout(300)
def test_the_pipeline_process_counts_and_stops_cleanly_on_sigterm(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS))
    env = {
        **os.environ,
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "STATEFED_TRIGGER_MS": "200",
        "STATEFED_PIPELINE_HEALTH_FILE": str(tmp_path / "pipeline.health"),
    }
    health = tmp_path / "pipeline.health"
    health.write_text("left by an earlier run")  # an old file does not stand for this run
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    view = WORD_COUNTS
    assert view in CATALOGUE
    others = [v for v in CATALOGUE if v is not view]
    # a query per view, and a dead-letter query per input topic
    queries = len(CATALOGUE) + len({v.topic for v in CATALOGUE})
    changelog = ChangelogReader(broker.bootstrap, view.changelog_topic)
    logs = {v.name: RecordLog(broker.bootstrap, v.changelog_topic) for v in others}
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
        for topic in {v.topic for v in others}:  # one event every other view can read
            produce(broker.bootstrap, topic, [tag.encode()], _event_value(others))

        def counted() -> bool:
            changelog.poll()
            got = changelog.counts()
            return all(got.get(w) == n for w, n in Counter(words).items())

        wait_until(counted, 90, "the process to count this test's words", interval_s=0)
        for name, log in logs.items():
            log.wait_until(functools.partial(_has_key, log, tag), f"{name} to hold the event")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        lines.wait_for("pipeline stopped", 5)
        assert not health.exists()  # a stopped pipeline is not healthy
    finally:
        changelog.close()
        for log in logs.values():
            log.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
        lines.close()


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
