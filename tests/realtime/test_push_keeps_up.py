"""Push keeps up with the changelog: 1,000 subscriptions `wordCount(word:)` over
graphql-transport-ws (the bench's subscriber process, 10 connections) to a real gateway and
two real nodes, while count records for their keys go straight to the changelog at 10,000 a
second, as the pipeline writes them. Every subscription ends at its key's last record, and
none sees an update twice or a key's offsets go back (rows between may be merged for a
subscriber that is behind: docs/querying.md#subscriptions). The latency is the bench's
(`make bench`, the live step)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from runtime.produce import new_producer
from schema import WORD_COUNTS, CountRow, encode_count, partition_for
from tests.bench.session import bench_process
from tooling.localcluster import LocalCluster
from tooling.processes import ManagedProcess, wait_until

KEYS = 1000
RATE = 10_000  # records a second
SECONDS = 5
PARTITIONS = 6

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = Path(tmp_path_factory.mktemp("push"))
    with LocalCluster(base, partitions=PARTITIONS, env=dict(os.environ), progress=print) as local:
        local.start_broker()
        for node_id in ("n1", "n2"):
            local.start_node(node_id)
        local.start_gateway()
        local.wait_routable()
        yield local


class Subscribers:
    """The subscriber process, its status (read twice a second) and its samples."""

    def __init__(self, gateway_url: str, keys: list[str], base: Path) -> None:
        self.status_path, self.out_path = base / "status.json", base / "samples.json"
        keys_path = base / "keys.txt"
        keys_path.write_text("\n".join(keys) + "\n")
        args = [
            *("--url", "ws://" + gateway_url.removeprefix("http://"), "--keys", str(keys_path)),
            *("--connections", "10", "--status", str(self.status_path)),
            *("--out", str(self.out_path)),
        ]
        self.process: ManagedProcess = bench_process(
            "subscribers", "tests.bench.subscribers", args, base / "subscribers.log"
        )

    def status(self) -> dict[str, Any]:
        assert self.process.running(), f"the subscriber exited: {self.process.log_tail()}"
        try:
            status: dict[str, Any] = orjson.loads(self.status_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        assert not status.get("errors") and not status.get("closed"), status
        return status

    def samples(self) -> dict[str, Any]:
        """Every update received: stops the process first (it writes them on SIGTERM)."""
        self.process.stop()
        samples: dict[str, Any] = orjson.loads(self.out_path.read_bytes())
        return samples


def _produce(bootstrap: str, keys: list[str]) -> dict[int, int]:
    """RATE records a second for SECONDS, round robin over `keys`, each key's count going
    1, 2, ...; the last count of each key (by its index)."""
    producer = new_producer(bootstrap)
    targets = [(key.encode(), partition_for(key, PARTITIONS)) for key in keys]
    total, produced, last = RATE * SECONDS, 0, {}
    began = time.monotonic()
    while produced < total:
        due = min(total, int((time.monotonic() - began) * RATE) + 1)
        while produced < due:
            index = produced % len(keys)
            count = produced // len(keys) + 1
            key, partition = targets[index]
            value = encode_count(CountRow(keys[index], count, int(time.time() * 1000)))
            try:
                producer.produce(WORD_COUNTS.changelog_topic, value, key, partition)
            except BufferError:
                break  # the local queue is full: serve it, then go on
            last[index] = count
            produced += 1
        producer.poll(0.001)
    assert producer.flush(30) == 0, "records left undelivered"
    return last


def test_every_subscription_ends_at_its_keys_last_record(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    keys = [f"push-{i:04d}" for i in range(KEYS)]
    subscribers = Subscribers(cluster.gateway_url, keys, tmp_path)
    subscribers.process.start()
    try:
        wait_until(
            lambda: subscribers.status().get("ready") == KEYS,
            60,
            "every subscription's first update",
            0.2,
        )
        last = _produce(cluster.bootstrap, keys)

        def at_last_values() -> bool:
            newest = subscribers.status().get("newest", {})
            return all(newest.get(str(i)) == count for i, count in last.items())

        wait_until(at_last_values, 90, "every subscription at its key's last count", 0.5)
        samples = subscribers.samples()
    finally:
        subscribers.process.stop()
    offsets: dict[int, list[int]] = {}
    for ident, offset in zip(samples["ident"], samples["offset"], strict=True):
        offsets.setdefault(ident, []).append(offset)
    assert len(offsets) == KEYS
    for ident, seen in offsets.items():
        assert seen == sorted(set(seen)), f"{keys[ident]}: an update twice or out of order"
    pushed = len(samples["ident"])
    print(
        f"{pushed:,} updates pushed for {RATE * SECONDS:,} records ({pushed / RATE / SECONDS:.0%})"
    )
