"""A real node materializing every view kind from real changelog records (as the pipeline
writes them, with explicit partitions) on a real Apache Kafka broker, queried over HTTP under
uvicorn; the node's clock is injected so retention can be watched at work."""

from __future__ import annotations

import dataclasses
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from node.storage.changes import position
from node.storage.store import PartitionStore
from runtime.topics import ensure_topics, statefed_topics
from schema import (
    DEMO_DOMAIN,
    EventRow,
    View,
    WindowRow,
    encode_event,
    encode_window,
    event_record_key,
    partition_for,
    window_record_key,
)
from tests.node.harness import P, ThreadNode, node_config, produce_changelog
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(120)

SIZE = 60_000
DAY = 24 * 3_600_000
T0 = 1_699_999_980_000  # a minute boundary
NEVER = -1
Record = tuple[bytes, bytes | None, int]  # changelog record key, value (None: tombstone), partition


class Clock:
    """The node's clock, moved by the test."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def unique_views() -> tuple[View, View, View]:
    """The demo domain's windowed, latest and history views on changelog topics of their own."""
    tag = uuid.uuid4().hex[:8]
    windowed, latest, history = (
        dataclasses.replace(v, name=f"t{tag}_{v.name}", topic=f"t{tag}.{v.topic}")
        for v in DEMO_DOMAIN[1:4]
    )
    return windowed, latest, history


def iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).isoformat()


def window_records(hosts: list[str]) -> tuple[list[Record], dict[tuple[str, int], int]]:
    """Every intermediate absolute count of three windows per host, one window per host
    that is already expired, and a tombstone; with the counts a reader must see."""
    records: list[Record] = []
    final: dict[tuple[str, int], int] = {}
    for n, host in enumerate(hosts):
        for i in range(3):
            start, count = T0 + i * SIZE, (n * 7 + i * 3) % 5 + 1
            for c in range(1, count + 1):
                row = WindowRow(host, start, start + SIZE, c, start + c)
                records.append(window_record(row))
            final[(host, start)] = count
        expired = WindowRow(host, T0 - DAY - SIZE, T0 - DAY, 9, T0 - DAY - 1)
        records.append(window_record(expired))
    gone = WindowRow(hosts[0], T0 + 2 * SIZE, T0 + 3 * SIZE, 0, 0)
    records.append((window_record_key(gone), None, partition_for(gone.key, P)))
    del final[(hosts[0], T0 + 2 * SIZE)]
    return records, final


def window_record(row: WindowRow) -> Record:
    return window_record_key(row), encode_window(row), partition_for(row.key, P)


def booking_events(customers: list[str]) -> list[EventRow]:
    """Events with clashing event times; shuffled, so older ones often arrive later."""
    events = [
        EventRow(c, T0 + (k * 7 % 4) * 1000, k % 3, 10 + k, {"trip": f"{c}-{k}"})
        for n, c in enumerate(customers)
        for k in range(n % 5 + 2)
    ]
    random.Random(7).shuffle(events)
    return events


def latest_records(events: list[EventRow]) -> list[Record]:
    return [(e.key.encode(), encode_event(e), partition_for(e.key, P)) for e in events]


def history_records(events: list[EventRow], deleted: EventRow) -> list[Record]:
    records: list[Record] = [
        (event_record_key(e), encode_event(e), partition_for(e.key, P)) for e in events
    ]
    records.append((event_record_key(deleted), None, partition_for(deleted.key, P)))
    return records


TOP_QUERY = (
    "query($s: DateTime!) { topHostsPerMinute(limit: 5, window: {start: $s}) { host count } }"
)
LATEST_QUERY = "query($cs: [String!]!) { lastBookings(customers: $cs) { customer trip eventTime } }"
HISTORY_QUERY = """query($c: String!, $a: String) { bookingHistory(customer: $c, first: 3,
  after: $a) { edges { node { customer trip eventTime } } pageInfo { hasNextPage endCursor } } }"""


def as_json(event: EventRow) -> dict[str, Any]:
    return {"customer": event.key, "trip": event.fields["trip"], "eventTime": iso(event.event_ms)}


def history_of(node: ThreadNode, customer: str) -> list[Any]:
    nodes: list[Any] = []
    after = None
    while True:
        document = node.query(HISTORY_QUERY, {"c": customer, "a": after})
        assert "errors" not in document, document
        page = document["data"]["bookingHistory"]
        nodes += [edge["node"] for edge in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            return nodes
        after = page["pageInfo"]["endCursor"]


def windows_of(node: ThreadNode, host: str) -> list[tuple[str, int]]:
    document = node.query(
        "query($h: String!) { hostAccessWindows(host: $h) { start count } }", {"h": host}
    )
    assert "errors" not in document, document
    return [(w["start"], w["count"]) for w in document["data"]["hostAccessWindows"]]


def stored_windows(node: ThreadNode, view: View, hosts: list[str]) -> set[tuple[str, int]]:
    """Every window in the node's stores, expired or not (read past the subgraph)."""
    found: set[tuple[str, int]] = set()
    for host in hosts:

        def windows(store: PartitionStore, host: str = host) -> list[WindowRow]:
            return store.windows(view.name, host, None, None, NEVER)

        read = node.app.registry.read(partition_for(host, P), windows)
        assert read is not None
        found |= {(w.key, w.start_ms) for w in read[0]}
    return found


def test_a_node_materializes_and_serves_every_kind(broker: KafkaBroker, tmp_path: Path) -> None:
    windowed, latest, history = views = unique_views()
    ensure_topics(broker.bootstrap, statefed_topics(P, views))
    tag = uuid.uuid4().hex[:6]
    hosts = [f"{tag}-h{i}" for i in range(16)]
    customers = [f"{tag}-c{i}" for i in range(12)]
    records, windows = window_records(hosts)
    produce_changelog(broker.bootstrap, windowed, records)
    events = booking_events(customers)
    produce_changelog(broker.bootstrap, latest, latest_records(events))
    deleted = events[0]
    produce_changelog(broker.bootstrap, history, history_records(events, deleted))

    clock = Clock(T0 + 3 * SIZE)
    config = node_config(
        broker.bootstrap, tmp_path, "nk", f"g-{windowed.name}", STATEFED_RETENTION_SWEEP_MS="200"
    )
    node = ThreadNode(config, views, clock=clock).start()
    try:
        wait_until(
            lambda: node.health()["state"] == "RUNNING" and len(node.health()["active"]) == P,
            30,
            "nk RUNNING with every partition",
        )
        expected = {
            h: [(iso(s), c) for (k, s), c in sorted(windows.items()) if k == h] for h in hosts
        }
        wait_until(lambda: {h: windows_of(node, h) for h in hosts} == expected, 15, "windows")
        # the already expired windows were dropped as they arrived, not stored
        assert stored_windows(node, windowed, hosts) == set(windows)

        top = node.query(TOP_QUERY, {"s": iso(T0)})
        ranking = sorted((-c, h) for (h, s), c in windows.items() if s == T0)
        assert top["data"]["topHostsPerMinute"] == [
            {"host": h, "count": -c} for c, h in ranking[:5]
        ]
        assert sorted(e["partition"] for e in top["extensions"]["freshness"]) == list(range(P))

        newest = [max((e for e in events if e.key == c), key=position) for c in customers]
        wait_until(
            lambda: (
                node.query(LATEST_QUERY, {"cs": customers})["data"]["lastBookings"]
                == [as_json(e) for e in newest]
            ),
            15,
            "latest bookings",
        )

        def expected_history(customer: str) -> list[Any]:
            kept = (e for e in events if e.key == customer and e != deleted)
            return [as_json(e) for e in sorted(kept, key=position)]

        wait_until(
            lambda: all(history_of(node, c) == expected_history(c) for c in customers),
            15,
            "booking histories",
        )

        # a day later the first window of every host has expired: hidden at once, and
        # purged by the sweep although no record arrives
        clock.now_ms = T0 + DAY + SIZE
        later = {h: [w for w in expected[h] if w[0] != iso(T0)] for h in hosts}
        assert {h: windows_of(node, h) for h in hosts} == later
        remaining = {(h, s) for h, s in windows if s != T0}
        wait_until(lambda: stored_windows(node, windowed, hosts) == remaining, 10, "the purge")
    finally:
        node.stop()
