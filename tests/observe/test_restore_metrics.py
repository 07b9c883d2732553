"""A fresh node restoring a long changelog shows it in `/metrics` while it happens: copies
that are restoring, records caught up rising towards the target, then every copy restored
with its applied offsets at the end of the changelog."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from schema import WORD_COUNTS, CountRow, encode_count, partition_for
from tests.observe.support import Samples, scrape, series
from tooling.localcluster import LocalCluster
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(300)

RECORDS = 300_000  # ~3 s of restore at the measured ~100k records/s
Copy = tuple[tuple[str, str], ...]


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, partitions=6, env={"STATEFED_HEARTBEAT_MS": "250"}) as cluster:
        cluster.start_broker()
        yield cluster


def _produce(bootstrap: str, records: int) -> None:
    """`records` changelog rows of word_counts, one per key, as the pipeline writes them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        row = CountRow(f"restore-{i}", 1 + i % 7, 0)
        value, partition = encode_count(row), partition_for(row.key, 6)
        while True:
            try:
                producer.produce(WORD_COUNTS.changelog_topic, value, row.key.encode(), partition)
                break
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                producer.poll(0.05)
    assert producer.flush(60) == 0, "changelog records not delivered"


def test_restore_gauges_move_while_a_fresh_node_restores(local: LocalCluster) -> None:
    _produce(local.bootstrap, RECORDS)
    local.start_node("fresh")
    url = local.node_urls["fresh"]
    restoring: dict[Copy, list[tuple[float, float]]] = {}  # (done, target) seen while restoring
    last: Samples = []

    def restored() -> bool:
        nonlocal last
        try:
            last = scrape(url)[1]
        except httpx.TransportError:
            return False
        flags = series(last, "statefed_node_restoring")
        done = series(last, "statefed_node_restore_done_records")
        target = series(last, "statefed_node_restore_target_records")
        for copy, flag in flags.items():
            if flag == 1:
                restoring.setdefault(copy, []).append((done[copy], target[copy]))
        return len(flags) == 6 and not any(flags.values())

    started = time.monotonic()
    wait_until(restored, 120, "the fresh node to restore every partition", 0.02)
    assert restoring, "no scrape saw a copy restoring"
    # records caught up rose while a copy restored, and never past its target
    moving = [seen for seen in restoring.values() if len({done for done, _ in seen}) > 1]
    assert moving, f"restore progress never moved between scrapes: {restoring}"
    assert all(done <= target or target == 0 for seen in moving for done, target in seen)
    done = series(last, "statefed_node_restore_done_records")
    target = series(last, "statefed_node_restore_target_records")
    assert done == target and sum(target.values()) == RECORDS
    applied = sum(series(last, "statefed_node_applied_offset").values())
    assert applied == RECORDS, f"applied {applied} of {RECORDS}"
    print(f"restored {RECORDS} records in {time.monotonic() - started:.1f} s from start-up")
