"""`statefed status`'s tables from a status body (no gateway): each node's liveness is
yes, suspect (reads avoid it) or NO."""

from __future__ import annotations

from rich.console import Console

from gateway.cluster.overview import status_body
from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import build_routing_table
from schema import MemberRecord, NodeState, PartitionStatus, Role
from tooling.statusview import status_view

NOW = 1_767_225_600_000


def _record(node_id: str, heartbeat_ms: int, partition: int) -> MemberRecord:
    copy = PartitionStatus(partition, Role.ACTIVE, 5, 5)
    return MemberRecord(
        node_id, f"http://{node_id}.test", NodeState.RUNNING, heartbeat_ms, 1000, (copy,)
    )


def test_a_node_reads_avoid_is_shown_suspect_and_a_dead_one_no() -> None:
    records = [
        _record("node-a", NOW, 0),
        _record("node-b", NOW, 1),
        _record("node-c", NOW - 10_000, 2),
    ]
    table = build_routing_table({r.node_id: r for r in records}, {"word_counts": 3}, NOW)
    body = status_body(table, StatusBoard(), (), NOW, suspects={"node-b"})
    console = Console(width=120, record=True)
    console.print(status_view(body))
    lines = [line.split("│") for line in console.export_text().splitlines()]
    liveness = {cells[1].strip(): cells[3].strip() for cells in lines if len(cells) > 3}
    assert {n: liveness[n] for n in ("node-a", "node-b", "node-c")} == {
        "node-a": "yes",
        "node-b": "suspect",
        "node-c": "NO",
    }
