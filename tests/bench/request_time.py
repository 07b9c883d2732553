"""Where a request's time goes in the shapes step, and what issue 31's 1.5x goal leaves.

At 1 connection wrk sends a request only once the last one was answered, so a request takes
1 / req/s: the CPU of the process the load went to (the front: a gateway, a peer or the
node), the CPU of the node behind it, and the rest (the wire both ways, wrk, waiting for a
core). A gateway that asks the node for a request takes at least the node's own time for it
(the node direct's time per request): where that is longer than the goal's time (the
fastest peer's over 1.5), no gateway that asks the node can meet the goal at 1 connection,
whatever its own cost; only answers from memory can. At 32 connections the two cores are
the bound: req/s is at most the cores' time over the CPU each request takes (front, node
and wrk), so the figure to compare is the CPU per request.

Pure functions over the cells' JSON figures (`peer_figures.Cell.to_json`): no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.bench.report import Section, fmt_num

__all__ = ["RequestTime", "goal_ms", "request_time", "write_request_times"]

GOAL_OVER_PEER = 1.5  # issue 31: at least 1.5x the fastest peer's req/s


@dataclass(frozen=True)
class RequestTime:
    """One cell's time per request at 1 connection (ms) and the CPU it took."""

    total_ms: float
    front_ms: float
    node_ms: float

    @property
    def rest_ms(self) -> float:
        """What no process of the cell spent CPU on: the wire, wrk, waiting for a core."""
        return max(0.0, self.total_ms - self.front_ms - self.node_ms)


def request_time(cell: Mapping[str, Any] | None) -> RequestTime | None:
    """The time per request of a cell measured at 1 connection (None when not measured)."""
    if not cell or not cell.get("rps"):
        return None
    return RequestTime(
        total_ms=1000.0 / cell["rps"],
        front_ms=cell.get("front_cpu_ms_per_request") or 0.0,
        node_ms=cell.get("node_cpu_ms_per_request") or 0.0,
    )


def goal_ms(fastest_peer_rps: float) -> float:
    """The longest a request may take at 1 connection for 1.5x the fastest peer's req/s."""
    return 1000.0 / (GOAL_OVER_PEER * fastest_peer_rps)


def _ms(value: float) -> str:
    return f"{value:.3f}"


def _time_cell(cell: Mapping[str, Any] | None) -> str:
    got = request_time(cell)
    if got is None:
        return "-"
    parts = f"{_ms(got.front_ms)} + {_ms(got.node_ms)} + {_ms(got.rest_ms)}"
    return f"{_ms(got.total_ms)} = {parts}"


def _cpu_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return "-"
    front = cell.get("front_cpu_ms_per_request") or 0.0
    node = cell.get("node_cpu_ms_per_request") or 0.0
    cores = front * float(cell["rps"]) / 1000.0
    return f"{_ms(front)} + {_ms(node)} (front {cores:.2f} cores)"


def _fastest(cells: Mapping[str, Mapping[str, Any]], peers: Sequence[str]) -> str | None:
    measured = [p for p in peers if p in cells]
    return max(measured, key=lambda p: float(cells[p]["rps"])) if measured else None


def _row(
    got: Mapping[str, Mapping[str, Any]], ours: Sequence[str], peers: Sequence[str], c: int
) -> list[str]:
    """One (shape, connections) row after its first two cells: the goal, then each target."""
    cell = _time_cell if c == 1 else _cpu_cell
    peer = _fastest(got, peers)
    if peer is None:
        goal, shown_peer = "-", "-"
    else:
        rps = float(got[peer]["rps"])
        goal = (
            f"<= {goal_ms(rps):.3f} ms a request"
            if c == 1
            else f">= {fmt_num(GOAL_OVER_PEER * rps)} req/s: <= {goal_ms(rps):.3f} ms of "
            "CPU a request on one thread"
        )
        shown_peer = f"{peer}: {cell(got[peer])}"
    return [goal, *(cell(got.get(t)) for t in ours), shown_peer, cell(got.get("node"))]


def _bound(got: Mapping[str, Mapping[str, Any]], peers: Sequence[str]) -> dict[str, Any] | None:
    """At 1 connection: the goal's time, the node direct's, and whether the second is the
    shorter (else no gateway that asks the node can meet the goal)."""
    peer, node = _fastest(got, peers), request_time(got.get("node"))
    if peer is None or node is None:
        return None
    limit = goal_ms(float(got[peer]["rps"]))
    return {
        "goal_ms": round(limit, 4),
        "node_direct_ms": round(node.total_ms, 4),
        "reachable_asking_the_node": node.total_ms < limit,
    }


def write_request_times(
    section: Section,
    cells: Mapping[str, Mapping[str, Any]],
    shapes: Sequence[str],
    ours: Sequence[str],
    peers: Sequence[str],
    connections: Sequence[int],
) -> None:
    """The table of where a request's time goes, by shape and connection count, for
    `ours` (cell names `{shape}_{target}_c{conns}`), the fastest of `peers` and the node;
    and the figures `request_time`: `_bound` of each shape measured at 1 connection."""
    table = section.table("shape", "conns", "goal", *ours, "fastest peer", "node")
    bounds: dict[str, dict[str, Any]] = {}
    for shape in shapes:
        for c in connections:
            targets = (*ours, *peers, "node")
            got = {t: one for t in targets if (one := cells.get(f"{shape}_{t}_c{c}"))}
            table.add(shape, c, *_row(got, ours, peers, c))
            bound = _bound(got, peers) if c == 1 else None
            if bound is not None:
                bounds[shape] = bound
    section.figures["request_time"] = bounds
    out_of_reach = [s for s, b in bounds.items() if not b["reachable_asking_the_node"]]
    section.notes.append(
        "Where a request's time goes (the second table; tests/bench/request_time.py): at "
        "1 connection a request's time (1 / req/s) = the front's CPU + the CPU of the node "
        "behind it + the rest (the wire, wrk, waiting for a core), in ms; at 32 connections "
        "the CPU per request, front + node (wrk's own not counted), and the cores the front "
        "used. The goal column is 1.5x the fastest peer's: the longest a request may take "
        "at 1 connection, the req/s at 32. Our gateway answers on one thread (its event "
        "loop), so at 32 connections its req/s is at most 1 / its CPU per request: the goal "
        "needs that CPU at most the goal's time a request, whatever the other core does. A "
        "gateway that asks the node for a request takes at least the node direct's time "
        "for it; " + _reach_sentence(out_of_reach)
    )


def _reach_sentence(out_of_reach: Sequence[str]) -> str:
    """What the node direct's time at 1 connection leaves of the goal, by shape."""
    if not out_of_reach:
        return (
            "at 1 connection that alone was shorter than the goal's time on every shape "
            "measured: there the goal leaves a gateway asking the node the difference."
        )
    return (
        "at 1 connection that alone is longer than the goal's time for "
        + ", ".join(out_of_reach)
        + ": there no gateway that asks the node for each request can meet the goal, only "
        "answers from memory can."
    )
