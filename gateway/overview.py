"""What the gateway knows of the cluster, as plain data: the nodes and partition copies of
the routing table, what the pipeline reports per view, and the dead letters.

`/health` (its nodes), the `cluster` field (its copies) and `/status.json` (all of it) are
built from here, so they show the same thing. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.routing import RoutingTable
from gateway.status import StatusBoard
from schema import PartitionStatus, View

__all__ = ["live_copies", "node_entries", "status_body", "unassigned"]


def live_copies(table: RoutingTable) -> list[tuple[str, PartitionStatus]]:
    """(node id, copy) of every partition copy a live node holds, by partition then node."""
    copies = [(n.node_id, p) for n in table.nodes.values() if n.alive for p in n.partitions]
    return sorted(copies, key=lambda c: (c[1].partition, c[0]))


def unassigned(table: RoutingTable) -> list[int]:
    """The partitions without a live ACTIVE owner (none while P is not known)."""
    return [p for p in range(table.max_partition_count() or 0) if not table.claims.get(p)]


def node_entries(table: RoutingTable, now_ms: int, *, urls: bool) -> list[dict[str, Any]]:
    """Every known node, by id: state, liveness, heartbeat age, partitions by role (and its
    URL when `urls`)."""
    return [
        {
            "id": node.node_id,
            **({"url": node.url} if urls else {}),
            "state": node.state.value,
            "alive": node.alive,
            "heartbeat_age_ms": max(0, now_ms - node.heartbeat_ms),
            "active": node.active(),
            "standby": node.standby(),
        }
        for node in sorted(table.nodes.values(), key=lambda n: n.node_id)
    ]


def status_body(
    table: RoutingTable, board: StatusBoard, catalogue: Sequence[View], now_ms: int
) -> dict[str, Any]:
    """GET /status.json: nodes, the partition map (each partition's ACTIVE and STANDBY
    copies with lag and restore progress), pipeline progress per view, dead letters."""
    dead = board.dead_letters()
    return {
        "now_ms": now_ms,
        "routing_version": table.version,
        "routing_stale_since_ms": table.stale_since_ms,
        "partition_count": table.max_partition_count(),
        "unassigned": unassigned(table),
        "nodes": node_entries(table, now_ms, urls=True),
        "partitions": _partition_map(table),
        "views": [_view_entry(view, board, now_ms) for view in catalogue],
        "dead_letters": {"total": dead.total, "recent": list(dead.recent)},
    }


def _partition_map(table: RoutingTable) -> list[dict[str, Any]]:
    """One entry per partition (0..P-1, and any other a node holds), its copies by node."""
    copies = live_copies(table)
    numbers = set(range(table.max_partition_count() or 0)) | {c.partition for _, c in copies}
    by_partition: dict[int, list[dict[str, Any]]] = {p: [] for p in sorted(numbers)}
    for node_id, copy in copies:
        by_partition[copy.partition].append(_copy_entry(node_id, copy))
    return [{"partition": p, "copies": c} for p, c in by_partition.items()]


def _copy_entry(node_id: str, copy: PartitionStatus) -> dict[str, Any]:
    return {
        "node": node_id,
        "role": copy.role.value,
        "applied_offset": copy.applied_offset,
        "end_offset": copy.end_offset,
        "lag": copy.lag,
        "restoring": copy.restoring,
        "restore_done": copy.restore_done,
        "restore_total": copy.restore_total,
        "lag_unknown_since_ms": copy.lag_unknown_since_ms,
        "store_error": copy.store_error,
    }


def _view_entry(view: View, board: StatusBoard, now_ms: int) -> dict[str, Any]:
    """A view and the pipeline's newest report on it (nulls and zeros before any)."""
    status = board.get(view.name)
    return {
        "name": view.name,
        "kind": view.kind.name,
        "batch_id": status.batch_id if status else None,
        "updated_age_ms": max(0, now_ms - status.updated_ms) if status else None,
        "late_dropped": status.late_dropped if status else 0,
        "source_offsets": sum(status.source_offsets.values()) if status else 0,
        "changelog_offsets": sum(status.changelog_offsets.values()) if status else 0,
    }
