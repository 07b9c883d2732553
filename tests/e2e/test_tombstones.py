"""Tombstones on the real cluster: a record with a null value deletes its key from the
latest view on every surface: a lookup (twice, so the gateway's cache has it first), a
multi-key lookup, a scan, and a subscription, which gets an update saying `deleted`. A
newer event brings the key back."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import orjson

from runtime.produce import Record, produce_records
from tests.e2e.conftest import Cluster
from tooling.processes import wait_until

ONE = "query($c: String!) { lastBooking(customer: $c) { customer trip } }"
MANY = "query($c: [String!]!) { lastBookings(customers: $c) { customer trip } }"
SCAN = """query($p: String!, $after: String) {
  allLastBookings(prefix: $p, first: 50, after: $after) {
    edges { node { customer trip } } pageInfo { hasNextPage endCursor }
  }
}"""
WATCH = "subscription($c: String!) { lastBooking(customer: $c) { customer trip deleted } }"
STREAM_S = 90.0


class Watcher:
    """One subscription over Server-Sent Events, read in a thread until it shows a
    deletion or the test ends it."""

    def __init__(self, cluster: Cluster, customer: str) -> None:
        self.url = cluster.local.gateway_url + "/stream"
        self.body = {"query": WATCH, "variables": {"c": customer}}
        self.updates: list[dict[str, Any]] = []
        self.started = threading.Event()
        self._client = httpx.Client(timeout=STREAM_S)
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()  # ends the stream, and with it the thread, if it still runs
        self._thread.join(STREAM_S)

    def _read(self) -> None:
        headers = {"accept": "text/event-stream"}
        try:
            with self._client.stream("POST", self.url, json=self.body, headers=headers) as r:
                self.started.set()
                for line in r.iter_lines():
                    if line.startswith("data:") and '"lastBooking"' in line:
                        self.updates.append(orjson.loads(line[5:])["data"]["lastBooking"])
                        if self.updates[-1]["deleted"]:
                            return
        except (httpx.HTTPError, RuntimeError):
            return  # closed by __exit__: the assertions say what was missing


def _scan(cluster: Cluster, prefix: str) -> list[str]:
    """Every customer of the view starting with `prefix`, page by page."""
    customers, after = [], None
    while True:
        page = cluster.data(SCAN, {"p": prefix, "after": after})["allLastBookings"]
        customers += [edge["node"]["customer"] for edge in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            return customers
        after = page["pageInfo"]["endCursor"]


def _book(cluster: Cluster, customer: str, trip: str, event_ms: int) -> None:
    value = orjson.dumps({"trip": trip, "timestamp": event_ms})
    cluster.saw_event_times([event_ms])
    produce_records(cluster.local.kafka, "bookings", [Record(customer, value)])


def _trip(cluster: Cluster, customer: str) -> str | None:
    row = cluster.data(ONE, {"c": customer})["lastBooking"]
    return None if row is None else str(row["trip"])


def test_a_tombstone_deletes_the_key_everywhere_and_a_subscriber_sees_it(
    cluster: Cluster,
) -> None:
    prefix = f"gone-{uuid.uuid4().hex[:8]}-"
    gone, kept = f"{prefix}a", f"{prefix}b"
    epoch = cluster.next_epoch_ms()
    for customer in (gone, kept):
        _book(cluster, customer, "booked", epoch)
    wait_until(lambda: _trip(cluster, gone) == "booked" == _trip(cluster, kept), 60, "booked")
    assert _trip(cluster, gone) == "booked"  # asked again: the gateway's cache may answer

    with Watcher(cluster, gone) as watcher:
        assert watcher.started.wait(30), "the subscription did not start"
        wait_until(lambda: watcher.updates != [], 30, "the subscription's first row")
        # deleted at its Kafka timestamp, after the booking's event time
        tombstone = Record(gone, None, epoch + 1_000)
        produce_records(cluster.local.kafka, "bookings", [tombstone])
        wait_until(lambda: _trip(cluster, gone) is None, 60, f"{gone} deleted at the gateway")
        # the push comes on a path of its own, not with the read: it may come a little later
        wait_until(lambda: watcher.updates[-1]["deleted"], 30, "the subscriber's deletion")
    assert watcher.updates[0] == {"customer": gone, "trip": "booked", "deleted": False}
    assert watcher.updates[-1] == {"customer": gone, "trip": None, "deleted": True}

    rows = cluster.data(MANY, {"c": [gone, kept]})["lastBookings"]
    assert rows == [None, {"customer": kept, "trip": "booked"}]
    assert _scan(cluster, prefix) == [kept]

    _book(cluster, gone, "back", epoch + 2_000)
    wait_until(lambda: _trip(cluster, gone) == "back", 60, f"{gone} back after a newer event")
    assert _scan(cluster, prefix) == [gone, kept]
