"""Windowed counts and event-time counts against an in-test model of Spark's watermark.

Spark moves the watermark once per micro-batch, so the events go in rounds and each round
is produced only once the view's status shows the previous round processed; the model
then knows the watermark in force for every event: the newest event time of the earlier
rounds minus the grace period.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pyspark.sql import SparkSession

from pipeline import start_queries
from schema import View, WindowSpec, decode_window, partition_for, window_record_key
from tests.pipeline.support import (
    ChangelogReader,
    Record,
    RecordLog,
    StatusReader,
    end_offsets,
    pipeline_config,
    produce_records,
)
from tooling.broker import KafkaBroker

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a minute boundary
# every record's Kafka timestamp: the views must ignore it. An hour ago, not years: the
# broker deletes records older than the input topic's retention (7 days) at its next
# retention check, and Spark's source then fails the query for data loss
KAFKA_TIME = int(time.time() * 1000) - 3_600_000
S = 1000


@dataclass
class WindowModel:
    """Spark's tumbling windows with a watermark, event by event."""

    spec: WindowSpec
    counts: Counter[tuple[str, int]] = field(default_factory=Counter)
    last: dict[tuple[str, int], int] = field(default_factory=dict)
    dropped: int = 0
    newest: int | None = None

    def watermark(self) -> int | None:
        return None if self.newest is None else self.newest - self.spec.grace_ms

    def late(self, event_ms: int, watermark: int | None) -> bool:
        end = event_ms - event_ms % self.spec.size_ms + self.spec.size_ms
        return watermark is not None and end <= watermark

    def round(self, events: list[tuple[str, int]]) -> None:
        """Apply one round; every event must be late (or not) whatever split into
        micro-batches Spark picks, i.e. also under the watermark this round may raise."""
        before = self.watermark()
        newest = max([t for _, t in events] + ([self.newest] if self.newest else []))
        after = newest - self.spec.grace_ms
        for key, t in events:
            assert self.late(t, before) == self.late(t, after), f"ambiguous test event {t}"
            if self.late(t, before):
                self.dropped += 1
                continue
            start = t - t % self.spec.size_ms
            self.counts[(key, start)] += 1
            self.last[(key, start)] = max(self.last.get((key, start), t), t)
        self.newest = newest

    def rows(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {k: (n, self.last[k]) for k, n in self.counts.items()}


def _record(host: str, event_ms: int) -> Record:
    value = orjson.dumps({"timestamp": event_ms, "path": f"/{host}/{event_ms}"})
    return Record(host.encode(), value, KAFKA_TIME)


def _windows(log: RecordLog, view: View) -> dict[tuple[str, int], tuple[int, int]]:
    assert view.window is not None
    rows = {}
    for key, (partition, value) in log.latest().items():
        row = decode_window(value)
        assert partition == partition_for(row.key, log.partitions), row
        assert row.end_ms == row.start_ms + view.window.size_ms
        assert key == window_record_key(row)
        rows[(row.key, row.start_ms)] = (row.count, row.last_event_ms)
    return rows


ROUNDS: list[list[tuple[str, int]]] = [
    # on time, windows [0, 60 s) and [60 s, 120 s)
    [(h, T0 + i * 2_500) for i, h in enumerate(["a", "b", "c"] * 10)],
    # moves the watermark to 136.75 s - 30 s = 106.75 s
    [(h, T0 + 75 * S + i * 3_250) for i, h in enumerate(["a", "b", "c", "d"] * 5)],
    # late: inside the grace (window [60 s, 120 s) ends after 106.75 s) and beyond it
    [("a", T0 + 115 * S), ("b", T0 + 110 * S), ("a", T0 + 30 * S), ("c", T0 + 59_999)],
]
AFTER_RESTART = [("d", T0 + 10 * S), ("a", T0 + 150 * S)]


def test_windows_follow_the_watermark_and_late_dropped_survives_a_restart(
    spark: SparkSession, broker: KafkaBroker, demo_views: dict[str, View], tmp_path: Path
) -> None:
    windowed, counted = demo_views["windowed_count"], demo_views["count"]
    assert windowed.window is not None and windowed.topic == counted.topic
    config = pipeline_config(broker, tmp_path / "checkpoints")
    model = WindowModel(windowed.window)
    counts: Counter[str] = Counter()
    placed: list[tuple[int, int]] = []
    log = RecordLog(broker.bootstrap, windowed.changelog_topic)
    status = StatusReader(broker.bootstrap, [windowed.name, counted.name])
    changelog = ChangelogReader(broker.bootstrap, counted.changelog_topic)

    def play(events: list[tuple[str, int]]) -> int:
        placed.extend(
            produce_records(broker.bootstrap, windowed.topic, [_record(*e) for e in events])
        )
        model.round(events)
        counts.update(h for h, _ in events)
        latest = status.wait_for_offsets(windowed.name, end_offsets(placed))
        return latest.late_dropped

    try:
        with start_queries(spark, config, [windowed, counted]):
            dropped = [play(events) for events in ROUNDS]
            log.wait_until(lambda: _windows(log, windowed) == model.rows(), "windows = model")
            changelog.wait_for(counts)
        assert dropped == [0, 0, 2] == [0, 0, model.dropped]

        with start_queries(spark, config, [windowed, counted]):
            assert play(AFTER_RESTART) == model.dropped == 3
            log.wait_until(lambda: _windows(log, windowed) == model.rows(), "windows = model")
            changelog.wait_for(counts)
            status.wait_for_offsets(counted.name, end_offsets(placed))
    finally:
        log.close()
        status.close()
        changelog.close()

    # the count view's last event time is the JSON field, never the Kafka timestamp
    events = list(itertools.chain(*ROUNDS, AFTER_RESTART))
    newest = {h: max(t for g, t in events if g == h) for h in counts}
    assert {k: r.last_event_ms for k, r in changelog.latest.items()} == newest
    by_view = {s.view: s for s in status.statuses}
    assert by_view[counted.name].late_dropped == 0
    final = status.latest(windowed.name)
    assert final is not None
    assert {p: o for p, o in final.source_offsets.items() if o} == end_offsets(placed)
    batches = [s.batch_id for s in status.statuses if s.view == windowed.name]
    assert batches == sorted(batches) and len(set(batches)) == len(batches)
