"""A page of a whole-view scan merged from the partitions' slices (gateway.cursors says
what a position is): each partition answered its next rows from its own position, one
more than the page holds; the k-way merge keeps the page's rows in order, and each edge's
cursor says where every partition stands once that edge is passed.

Every partition that answered has, after edge e, nothing left at or before e: it sent its
rows in order from its position, and a slice that did not reach e would have been cut at
more rows than the page holds. So its position becomes e (or stays, when it was already
past e: a partition resumed after a failure). A partition that failed keeps its position,
so paging on reads it from where it stopped; its rows may then come after rows of other
partitions already passed.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gateway import cursors
from gateway.cursors import ScanCursor
from gateway.rows import Scanned

__all__ = ["ScanEdge", "ScanPage", "merge_page"]

Positioned = tuple[bytes, Scanned]  # a row and its position (its key tail)


@dataclass(frozen=True)
class ScanEdge:
    cursor: str
    row: Scanned


@dataclass(frozen=True)
class ScanPage:
    """Edges in key order, whatever the direction read. `has_next_page` is computed when
    reading forwards, `has_previous_page` when reading backwards (the other is false, as
    Relay allows); both are true while a partition failed, since its rows are unknown."""

    edges: list[ScanEdge]
    has_next_page: bool = False
    has_previous_page: bool = False
    start_cursor: str | None = None
    end_cursor: str | None = None


def _merged(
    slices: Mapping[int, Sequence[Positioned]], backward: bool
) -> Iterator[tuple[bytes, int, Scanned]]:
    streams = [[(at, p, row) for at, row in rows] for p, rows in slices.items()]
    return heapq.merge(*streams, key=lambda item: item[0], reverse=backward)


def _passed(start: bytes | None, at: bytes, backward: bool) -> bytes:
    """A partition's position once the scan passed `at`: `at`, or its own if already past."""
    if start is None:
        return at
    return min(start, at) if backward else max(start, at)


def merge_page(
    start: ScanCursor,
    slices: Mapping[int, Sequence[Positioned]],
    size: int,
    failed: Collection[int],
) -> ScanPage:
    """The first `size` rows of `slices` in `start`'s direction from `start`'s positions;
    partitions in `failed` did not answer (nor do they have slices)."""
    backward = start.backward
    merged = _merged(slices, backward)
    positions = list(start.positions)
    encode = cursors.encoder(start)
    edges: list[ScanEdge] = []
    for at, _, row in merged:
        if len(edges) == size:
            more = True
            break
        for partition in slices:
            positions[partition] = _passed(start.positions[partition], at, backward)
        edges.append(ScanEdge(encode(at, tuple(positions)), row))
    else:
        more = False
    more = more or bool(failed)
    if backward:
        edges.reverse()
    first: str | None = None
    last: str | None = None
    if edges:
        first, last = edges[0].cursor, edges[-1].cursor
    elif failed:  # nothing came, but paging on retries the partitions that failed
        first = last = cursors.encode(dataclasses.replace(start, at=None))
    return ScanPage(edges, more and not backward, more and backward, first, last)
