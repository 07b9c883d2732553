"""What the gateway knows of the cluster, as plain data: the nodes and partition copies of
the routing table, what the pipeline reports per view, and the dead letters.

`/health` (its nodes), the `cluster` field (its copies) and `/status.json` (all of it) are
built from here, so they show the same thing. `/status.json` also says what needs an
operator's attention (`findings`) and, per partition, the lag of the copy reads go to: the
one number the status page plots. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal

from gateway.cluster.pipeline import DeadLetterSummary, StatusBoard
from gateway.cluster.routing import NodeInfo, RoutingTable
from schema import PartitionStatus, Role, View

__all__ = ["live_copies", "node_entries", "status_body", "unassigned"]

_Level = Literal["problem", "warning", "notice"]
_LEVELS: tuple[_Level, ...] = ("problem", "warning", "notice")


def live_copies(table: RoutingTable) -> list[tuple[str, PartitionStatus]]:
    """(node id, copy) of every partition copy a live node holds, by partition then node."""
    copies = [(n.node_id, p) for n in table.nodes.values() if n.alive for p in n.partitions]
    return sorted(copies, key=lambda c: (c[1].partition, c[0]))


def unassigned(table: RoutingTable) -> list[int]:
    """The partitions without a live ACTIVE owner (none while P is not known)."""
    return [p for p in range(table.max_partition_count() or 0) if not table.claims.get(p)]


def node_entries(
    table: RoutingTable, now_ms: int, *, urls: bool, suspects: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Every known node, by id: state, liveness, whether reads avoid it (`suspects`: missed
    heartbeats or calls left without an answer), heartbeat age, partitions by role (and its
    URL and process incarnation, which its feed handshakes name, when `urls`)."""
    return [
        {
            "id": node.node_id,
            **({"url": node.url, "incarnation": node.incarnation} if urls else {}),
            "state": node.state.value,
            "alive": node.alive,
            "suspect": node.alive and node.node_id in suspects,
            "heartbeat_age_ms": max(0, now_ms - node.heartbeat_ms),
            "active": node.active(),
            "standby": node.standby(),
        }
        for node in sorted(table.nodes.values(), key=lambda n: n.node_id)
    ]


def status_body(
    table: RoutingTable,
    board: StatusBoard,
    catalogue: Sequence[View],
    now_ms: int,
    suspects: Collection[str] = (),
) -> dict[str, Any]:
    """GET /status.json: nodes, the partition map (each partition's ACTIVE and STANDBY
    copies with lag and restore progress), pipeline progress per view, dead letters, and
    the findings that need attention, most severe first."""
    dead = board.dead_letters()
    views = [_view_entry(view, board, now_ms) for view in catalogue]
    return {
        "now_ms": now_ms,
        "routing_version": table.version,
        "routing_stale_since_ms": table.stale_since_ms,
        "partition_count": table.max_partition_count(),
        "unassigned": unassigned(table),
        "findings": _findings(table, views, dead, now_ms, suspects),
        "nodes": node_entries(table, now_ms, urls=True, suspects=suspects),
        "partitions": _partition_map(table),
        "views": views,
        "dead_letters": {"total": dead.total, "recent": list(dead.recent)},
    }


def _partition_map(table: RoutingTable) -> list[dict[str, Any]]:
    """One entry per partition (0..P-1, and any other a node holds): its condition, the node
    reads go to and that copy's lag (None without one or while unknown), its copies by node."""
    copies = live_copies(table)
    numbers = set(range(table.max_partition_count() or 0)) | {c.partition for _, c in copies}
    by_partition: dict[int, list[dict[str, Any]]] = {p: [] for p in sorted(numbers)}
    for node_id, copy in copies:
        by_partition[copy.partition].append(_copy_entry(node_id, copy))
    entries = []
    for partition, held in by_partition.items():
        owner = _owner_copy(table, partition)
        known = owner is not None and owner[1].lag_unknown_since_ms is None
        entries.append(
            {
                "partition": partition,
                "condition": _condition(owner),
                "owner": None if owner is None else owner[0],
                "lag": owner[1].lag if owner is not None and known else None,
                "copies": held,
            }
        )
    return entries


def _owner_copy(table: RoutingTable, partition: int) -> tuple[str, PartitionStatus] | None:
    """(node id, copy) of the ACTIVE copy the gateway routes `partition`'s reads to."""
    node = table.owner(partition)
    if node is None:
        return None
    copy = next((c for c in _held(node, partition) if c.role is Role.ACTIVE), None)
    return None if copy is None else (node.node_id, copy)


def _held(node: NodeInfo, partition: int) -> Iterable[PartitionStatus]:
    return (c for c in node.partitions if c.partition == partition)


def _condition(owner: tuple[str, PartitionStatus] | None) -> str:
    """How the copy reads of a partition go to is: UNASSIGNED (there is none), STORE_ERROR,
    LAG_UNKNOWN, RESTORING or OK, the first that holds."""
    if owner is None:
        return "UNASSIGNED"
    copy = owner[1]
    if copy.store_error is not None:
        return "STORE_ERROR"
    if copy.lag_unknown_since_ms is not None:
        return "LAG_UNKNOWN"
    return "RESTORING" if copy.restoring else "OK"


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


def _findings(
    table: RoutingTable,
    views: Sequence[dict[str, Any]],
    dead: DeadLetterSummary,
    now_ms: int,
    suspects: Collection[str],
) -> list[dict[str, str]]:
    """What an operator should look at, as `{"level", "text"}`, problems first, then
    warnings, then notices (normal work such as a restore, or history such as dead
    letters); an empty list when all is well."""
    found: list[tuple[_Level, str]] = [
        *_routing_findings(table, now_ms),
        *_node_findings(table, now_ms, suspects),
        *_copy_findings(table, now_ms),
        *_pipeline_findings(views, dead),
    ]
    found.sort(key=lambda f: _LEVELS.index(f[0]))
    return [{"level": level, "text": text} for level, text in found]


def _routing_findings(table: RoutingTable, now_ms: int) -> list[tuple[_Level, str]]:
    found: list[tuple[_Level, str]] = []
    if table.stale_since_ms is not None:
        age = _duration(now_ms - table.stale_since_ms)
        found.append(
            (
                "problem",
                f"the broker has not answered the gateway for {age}: the routing "
                "table and node liveness are as of then",
            )
        )
    if table.max_partition_count() is None:
        found.append(
            ("warning", "the partition count is not known yet: no changelog topic's metadata read")
        )
    missing = unassigned(table)
    if missing:
        found.append(
            (
                "problem",
                f"{_partitions(missing)} {'has' if len(missing) == 1 else 'have'} no live "
                "ACTIVE copy: reads there fail with PARTITION_UNAVAILABLE",
            )
        )
    return found


def _node_findings(
    table: RoutingTable, now_ms: int, suspects: Collection[str]
) -> list[tuple[_Level, str]]:
    """Dead nodes, and live ones reads avoid: late with their heartbeats, or among
    `suspects` (calls left without an answer)."""
    found: list[tuple[_Level, str]] = []
    avoided = "suspect, its partitions are read from standbys where they can be"
    for node in sorted(table.nodes.values(), key=lambda n: n.node_id):
        age = _duration(now_ms - node.heartbeat_ms)
        if not node.alive:
            found.append(
                ("warning", f"node {node.node_id} not heard for {age}: dead, serves nothing")
            )
        elif node.suspect:
            found.append(
                (
                    "warning",
                    f"node {node.node_id} is late with its heartbeats (last {age} ago): {avoided}",
                )
            )
        elif node.node_id in suspects:
            found.append(
                ("warning", f"node {node.node_id} left calls in a row without an answer: {avoided}")
            )
    return found


def _copy_findings(table: RoutingTable, now_ms: int) -> list[tuple[_Level, str]]:
    """Store errors (one per copy), unknown lag and restores (one per node) of live copies."""
    by_node: dict[str, list[PartitionStatus]] = {}
    for node_id, copy in live_copies(table):
        by_node.setdefault(node_id, []).append(copy)
    found: list[tuple[_Level, str]] = []
    for node_id, copies in sorted(by_node.items()):
        for copy in (c for c in copies if c.store_error is not None):
            found.append(
                (
                    "problem",
                    f"node {node_id} cannot write its store of partition {copy.partition} "
                    f"({copy.store_error}): applying is paused and retried",
                )
            )
        unknown = [c for c in copies if c.lag_unknown_since_ms is not None]
        if unknown:
            since = min(c.lag_unknown_since_ms or now_ms for c in unknown)
            found.append(
                (
                    "warning",
                    f"node {node_id}: lag of {_partitions([c.partition for c in unknown])} "
                    f"unknown for {_duration(now_ms - since)} (copies just attached, the "
                    "broker not answering the node, or the node stood still)",
                )
            )
        restoring = [c for c in copies if c.restoring]
        if restoring:
            found.append(("notice", f"node {node_id} is restoring {_restores(restoring)}"))
    return found


def _pipeline_findings(
    views: Sequence[dict[str, Any]], dead: DeadLetterSummary
) -> list[tuple[_Level, str]]:
    found: list[tuple[_Level, str]] = []
    silent = [v["name"] for v in views if v["batch_id"] is None]
    if silent:
        found.append(
            ("notice", f"no pipeline report yet for {', '.join(silent)}: is the pipeline running?")
        )
    if dead.total:
        newest = f" (newest: {dead.recent[0].get('reason')})" if dead.recent else ""
        found.append(
            (
                "notice",
                f"{dead.total} input record{'s' if dead.total != 1 else ''} "
                f"rejected to the dead-letter topic{newest}",
            )
        )
    return found


def _partitions(numbers: Sequence[int]) -> str:
    listed = ", ".join(map(str, sorted(numbers)))
    return f"partition{'s' if len(numbers) != 1 else ''} {listed}"


def _restores(copies: Sequence[PartitionStatus]) -> str:
    """The restoring copies of one node and their progress: "partitions 1, 2 (13 of 40 records)"."""
    done = sum(c.restore_done for c in copies)
    known = all(c.restore_total > 0 for c in copies)
    total = f"{sum(c.restore_total for c in copies):,}" if known else "?"
    return f"{_partitions([c.partition for c in copies])} ({done:,} of {total} records)"


def _duration(ms: int) -> str:
    """A human span: "4.2 s", "3 min", "2 h 5 min"."""
    ms = max(0, ms)
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes = ms // 60_000
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
