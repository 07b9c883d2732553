"""Real-Time Mode through a driver SIGKILL: the pipeline process (`statefed pipeline`)
runs count, latest and aggregate views in both modes over one orders topic, is SIGKILLed
while it writes, and restarts from its checkpoints. What a node keeps of each changelog
(a count key's greatest count, an event row's most advanced position) is then the same
in both modes, and the counts are the events produced: the replayed records of Real-Time
Mode's at-least-once output change nothing, and nothing is counted twice or lost. The
working copies of the state stores stay in the pipeline's scratch directory: the restart
removes those of the killed run, and the clean stop its own."""

from __future__ import annotations

import functools
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from pipeline.session import SCRATCH
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, EventRow, View
from tests.pipeline.realtime_views import CATALOGUE, PAIRS, SPEC, TOPIC, decoded, differences
from tests.pipeline.support import (
    PARTITIONS,
    Record,
    StatusReader,
    TopicReader,
    produce_records,
)
from tooling.broker import KafkaBroker
from tooling.processes import ManagedProcess, wait_until

CUSTOMERS = [f"c{i}" for i in range(40)]
# longer than the test runs: no Real-Time Mode checkpoint completes in it
UNCUT_MS = 600_000


class Kept:
    """A changelog as a node keeps it: per key the greatest count or the most advanced
    event row (a tombstone deletes), and how many records went backwards (replays)."""

    def __init__(self, broker: KafkaBroker, view: View) -> None:
        self.view = view
        self.reader = TopicReader(broker.bootstrap, view.changelog_topic)
        self.rows: dict[str, Any] = {}
        self.records = 0  # read so far
        self.backwards = 0

    def poll(self) -> dict[str, Any]:
        for _partition, key, value in self.reader.read(0.1):
            assert key is not None
            self.records += 1
            if not value:
                self.rows.pop(key.decode(), None)
                continue
            row = decoded(self.view, value)
            old = self.rows.get(row.key)
            if old is not None and _position(row) < _position(old):
                self.backwards += 1
                continue
            self.rows[row.key] = row
        return self.rows

    def close(self) -> None:
        self.reader.close()


def _position(row: CountRow | EventRow) -> tuple[int, ...]:
    if isinstance(row, CountRow):
        return (row.count,)
    return (row.event_ms, row.source_partition, row.source_offset)


def _orders(rng: random.Random, n: int, t0: int) -> list[Record]:
    return [
        Record(
            rng.choice(CUSTOMERS).encode(),
            orjson.dumps(
                {
                    "amount": rng.randint(1, 500) / 4,
                    "quantity": rng.randint(1, 9),
                    "product": rng.choice("abcde"),
                    "status": rng.choice(["PAID", "OPEN"]),
                    "timestamp": t0 + i,
                }
            ),
        )
        for i in range(n)
    ]


def test_both_modes_keep_the_same_rows_through_a_driver_sigkill(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, CATALOGUE))
    scratch, java_tmp = tmp_path / "checkpoints" / SCRATCH, tmp_path / "java-tmp"
    java_tmp.mkdir()
    java_options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={java_tmp}"
    env = {
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_CATALOGUE": SPEC,
        "STATEFED_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        # Spark's own default for its scratch files: the JVM's temporary directory
        "SPARK_SUBMIT_OPTS": java_options,
        "STATEFED_TRIGGER_MS": "200",
        "STATEFED_DELIVERY_TIMEOUT_MS": "20000",
        # no Real-Time Mode checkpoint completes before the kill (checked below): its
        # first batch is cut short, and the restart writes every record of it again
        "STATEFED_REALTIME_CHECKPOINT_MS": str(UNCUT_MS),
    }
    rng = random.Random(30)
    kept = {v.name: Kept(broker, v) for v in CATALOGUE}
    produced: Counter[str] = Counter()

    def produce(n: int, t0: int) -> None:
        """Produce `n` orders from event time `t0`."""
        records = _orders(rng, n, t0)
        produce_records(broker.bootstrap, TOPIC, records)
        produced.update(r.key.decode() for r in records if r.key is not None)

    def pipeline() -> ManagedProcess:
        process = ManagedProcess("pipeline", ["pipeline"], env, tmp_path / "pipeline.log")
        process.start()
        try:
            process.wait_for_log("statefed pipeline: ready", 240)
        except BaseException:  # never ready: stopped here, as the caller holds no handle
            process.stop()
            raise
        return process

    first = pipeline()
    try:
        assert "started in Real-Time Mode" in first.log_tail(200)
        produce(400, 1_000)
        _wait_equal(kept, produced)
        before = {rt.name: kept[rt.name].records for rt, _mb in PAIRS}
        produce(3_000, 10_000)
        # killed while every Real-Time Mode query writes, some hundreds of records in:
        # the driver, its JVM and workers
        written = functools.partial(_written, kept, before, 300)
        wait_until(written, 60, "the second round to be written")
        first.kill()
    finally:
        first.stop()
    killed = _state_stores(scratch)
    assert killed, f"no state store's working copy in {scratch}"
    second = pipeline()
    try:
        assert not [path for path in killed if path.exists()], "the killed run's copies stayed"
        produce(400, 20_000)
        _wait_equal(kept, produced)
        statuses = StatusReader(broker.bootstrap, [rt.name for rt, _mb in PAIRS])
        try:
            statuses.poll()
            checkpoints = [(s.view, s.batch_id) for s in statuses.statuses]
        finally:
            statuses.close()
        # a Real-Time Mode query reports a status per checkpoint
        assert not checkpoints, f"Real-Time Mode checkpointed in the test: {checkpoints}"
        # the kill cut the first checkpoint short: Real-Time Mode wrote its rows again,
        # and only there
        for rt, mb in PAIRS:
            assert kept[rt.name].backwards > 0, f"{rt.name} wrote nothing again"
            assert kept[mb.name].backwards == 0, f"{mb.name} went backwards"
    finally:
        second.stop()
        for log in kept.values():
            log.close()
    assert not scratch.exists(), "the stopped run's scratch directory stayed"
    assert not _state_stores(java_tmp), f"state stores' working copies in {java_tmp}"


def _state_stores(directory: Path) -> list[Path]:
    """The working copies of Spark's RocksDB state stores under `directory`."""
    return list(directory.rglob("StateStoreId*")) if directory.exists() else []


def _written(kept: dict[str, Kept], before: dict[str, int], records: int) -> bool:
    """Whether every Real-Time Mode twin's changelog has `records` more than `before`."""
    for name, read in before.items():
        kept[name].poll()
        if kept[name].records < read + records:
            return False
    return True


def _wait_equal(kept: dict[str, Kept], produced: Counter[str]) -> None:
    """Wait until both twins of every view keep the same rows, and the count twins the
    produced counts."""

    def unequal() -> dict[str, Any]:
        found: dict[str, Any] = {}
        for rt, mb in PAIRS:
            differ = differences(kept[rt.name].poll(), kept[mb.name].poll())
            if differ:
                found[rt.name] = dict(list(differ.items())[:4])
        counts = {k: r.count for k, r in kept[PAIRS[0][0].name].rows.items()}
        if counts != dict(produced):
            found["counted"] = {k: (counts.get(k), n) for k, n in produced.items()}
        return found

    wait_until(lambda: not unequal(), 120, lambda: str(unequal()), interval_s=0)
