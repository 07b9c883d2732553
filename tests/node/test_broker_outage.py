"""A node through a broker outage: a broker of its own frozen with SIGSTOP past the group
session timeout, then resumed. The node keeps serving what its stores hold and says since
when the lag is unknown; once the broker is back, the group assigns the partitions again
and the node applies what was written meanwhile, every count exact."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow
from tests.node.harness import P, ThreadNode, node_config, produce_counts, unique_count_view
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(180)

TOP = "{ topWords(limit: 100) { word count } }"


def _since_ms(entries: list[dict[str, Any]]) -> list[float] | None:
    """`lagUnknownSince` of every entry (ms), or None unless every entry has one."""
    if not entries or any("lagUnknownSince" not in e for e in entries):
        return None
    return [datetime.fromisoformat(e["lagUnknownSince"]).timestamp() * 1000 for e in entries]


def _running(node: ThreadNode) -> bool:
    health = node.health()
    return health["state"] == "RUNNING" and health["active"] == list(range(P))


def test_a_node_serves_its_stores_through_a_broker_outage_then_catches_up(
    tmp_path: Path,
) -> None:
    tag = uuid.uuid4().hex[:6]
    head = {f"{tag}-h{i}": i % 4 + 1 for i in range(24)}
    tail = {f"{tag}-t{i}": 2 for i in range(10)}
    rows = [CountRow(k, n, 1) for k, c in head.items() for n in range(1, c + 1)]
    view = unique_count_view()
    with KafkaBroker(log_path=tmp_path / "broker.log") as broker:
        ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
        produce_counts(broker.bootstrap, view, rows)
        config = node_config(broker.bootstrap, tmp_path, "n1", f"g-{view.name}")
        node = ThreadNode(config, [view]).start()
        try:
            wait_until(lambda: _running(node), 30, "n1 RUNNING with every partition")
            wait_until(lambda: node.counts(list(head)) == head, 30, "the head counted")
            frozen_ms = wall_clock_ms()
            broker.pause()
            try:
                document: dict[str, Any] = {}

                def lag_unknown() -> list[float] | None:
                    nonlocal document
                    document = node.query(TOP)
                    return _since_ms(document["extensions"]["freshness"])

                since = wait_until(lag_unknown, 15, "freshness saying the lag is unknown")
                assert all(frozen_ms - 1000 <= s <= wall_clock_ms() for s in since), since
                # past the group's session timeout the assignment is lost: the stores serve on
                wait_until(lambda: node.health()["state"] == "REBALANCING", 30, "a lost session")
                health = node.health()
                assert health["active"] == list(range(P)), health
                assert health["broker_unreachable_since_ms"] is not None
                assert all("lagUnknownSince" in p for p in health["partitions"]), health
                assert node.counts(list(head)) == head
            finally:
                broker.resume()
            produce_counts(broker.bootstrap, view, [CountRow(k, 2, 2) for k in tail])

            def caught_up() -> bool:
                health = node.health()
                known = not any("lagUnknownSince" in p for p in health["partitions"])
                return known and _running(node) and node.counts(list(tail)) == tail

            wait_until(caught_up, 90, "the node RUNNING again with the tail applied")
            assert node.counts(list(head)) == head
            assert node.health()["broker_unreachable_since_ms"] is None
        finally:
            node.stop()
