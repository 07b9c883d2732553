"""The figures of the peers step, from its load runs: pure functions, no I/O.

A cell is one (target, form, connections); each cell is loaded once per round, and the
rounds are interleaved (every cell of round 1, then every cell of round 2), so a drift of
the machine falls on every target alike. A cell's figure joins its rounds: requests/s over
all of them, p50 and p99 the mean of the rounds', CPU per request over all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

__all__ = ["Cell", "Round", "faster_peer", "in_turn", "join_rounds", "peer_ratios"]


@dataclass(frozen=True)
class Round:
    """One load run of a cell, with the CPU seconds its serving processes used."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    checked: int
    wrong: int
    failed: int
    front_cpu_s: float  # the process the load went to (gateway, peer, node or floor)
    node_cpu_s: float  # the statefed node behind it (0 when the load went to the node)


@dataclass(frozen=True)
class Cell:
    """A (target, form, connections) over its rounds."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    checked: int
    wrong: int
    failed: int
    front_cpu_ms: float | None  # per request
    node_cpu_ms: float | None  # per request
    rounds_rps: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "rps": round(self.rps, 1),
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "requests": self.requests,
            "checked": self.checked,
            "wrong": self.wrong,
            "failed": self.failed,
            "front_cpu_ms_per_request": _round(self.front_cpu_ms, 4),
            "node_cpu_ms_per_request": _round(self.node_cpu_ms, 4),
            "rounds_rps": [round(r, 1) for r in self.rounds_rps],
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def in_turn(targets: Sequence[str], number: int) -> list[str]:
    """The order of `targets` in round `number` (from 1): as given in odd rounds, reversed in
    even ones, so no target always runs first (after the previous cell's load on another
    target) and drift over a round weighs on every target alike."""
    return list(targets) if number % 2 else list(reversed(targets))


def join_rounds(rounds: Sequence[Round]) -> Cell:
    """One cell's figure from its rounds (at least one)."""
    if not rounds:
        raise ValueError("a cell needs at least one round")
    requests = sum(r.requests for r in rounds)
    seconds = sum(r.seconds for r in rounds)

    def per_request(cpu_s: float) -> float | None:
        return 1000 * cpu_s / requests if requests else None

    return Cell(
        rps=requests / seconds if seconds > 0 else 0.0,
        p50_ms=fmean(r.p50_ms for r in rounds),
        p99_ms=fmean(r.p99_ms for r in rounds),
        requests=requests,
        checked=sum(r.checked for r in rounds),
        wrong=sum(r.wrong for r in rounds),
        failed=sum(r.failed for r in rounds),
        front_cpu_ms=per_request(sum(r.front_cpu_s for r in rounds)),
        node_cpu_ms=per_request(sum(r.node_cpu_s for r in rounds)),
        rounds_rps=tuple(r.requests / r.seconds if r.seconds > 0 else 0.0 for r in rounds),
    )


def faster_peer(cells: dict[str, Cell], peers: Iterable[str]) -> str | None:
    """The peer with the most requests/s among `peers` that were measured."""
    measured = [p for p in peers if p in cells]
    return max(measured, key=lambda p: cells[p].rps) if measured else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def peer_ratios(
    cells: dict[tuple[str, str, int], Cell],
    ours: Sequence[str],
    peers: Sequence[str],
    forms: Sequence[str],
    connections: Sequence[int],
) -> dict[str, Any]:
    """Each of `ours` over the faster peer (req/s, p50, p99) and over each peer (req/s) per
    form and connection count, and each target's second form over its first (req/s); keys
    like `gateway_rps_over_faster_peer_variables_c32`, `gateway_rps_over_hive_variables_c32`,
    `literals_over_variables_node_c32`."""
    ratios: dict[str, Any] = {}
    for form in forms:
        for c in connections:
            row = {t: cell for (t, f, n), cell in cells.items() if f == form and n == c}
            peer = faster_peer(row, peers)
            if peer is None:
                continue
            ratios[f"faster_peer_{form}_c{c}"] = peer
            for target in (t for t in ours if t in row):
                ratios.update(_over(row[target], row[peer], f"{target}_", f"_{form}_c{c}"))
                for other in (p for p in peers if p in row):
                    key = f"{target}_rps_over_{other}_{form}_c{c}"
                    ratios[key] = _ratio(row[target].rps, row[other].rps)
    if len(forms) == 2:
        first, second = forms
        for target in sorted({t for (t, _, _) in cells}):
            for c in connections:
                a, b = cells.get((target, first, c)), cells.get((target, second, c))
                if a is not None and b is not None:
                    ratios[f"{second}_over_{first}_{target}_c{c}"] = _ratio(b.rps, a.rps)
    return ratios


def _over(mine: Cell, peer: Cell, prefix: str, suffix: str) -> dict[str, float | None]:
    return {
        f"{prefix}rps_over_faster_peer{suffix}": _ratio(mine.rps, peer.rps),
        f"{prefix}p50_over_faster_peer{suffix}": _ratio(mine.p50_ms, peer.p50_ms),
        f"{prefix}p99_over_faster_peer{suffix}": _ratio(mine.p99_ms, peer.p99_ms),
    }
