"""A page of a whole-view scan merged from the partitions' slices (gateway.model.cursors says
what a position is): each partition answered its next rows from its own position, one
more than the page holds; the k-way merge keeps the page's rows in order, and each edge's
cursor says where every partition stands once that edge is passed.

Every partition that answered has, after edge e, nothing left at or before e: it sent its
rows in order from its position, and a slice that did not reach e would have been cut at
more rows than the page holds. So its position becomes e (or stays, when it was already
past e: a partition resumed after a failure). A partition that failed keeps its position,
so paging on reads it from where it stopped; its rows may then come after rows of other
partitions already passed.

Where every partition stands after an edge follows from the edge's position alone, so an
edge's cursor is encoded only when asked for, and a slice's rows are built only for the
page's edges (a page reads about P times more rows than it shows).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from gateway.model import cursors
from gateway.model.cursors import ScanCursor
from gateway.model.rows import Scanned

__all__ = ["ScanEdge", "ScanPage", "ScanSlice", "merge_page"]


@dataclass(frozen=True)
class ScanSlice:
    """One partition's answer: its rows' positions (key tails) in the order read, and the
    rows as columns, one value per row each; `build` makes the row of one value per
    column."""

    positions: Sequence[bytes]
    columns: Sequence[Sequence[Any]]
    build: Callable[..., Scanned]

    @classmethod
    def of(cls, rows: Sequence[tuple[bytes, Scanned]]) -> ScanSlice:
        """A slice of rows already built, each with its position."""
        return cls([at for at, _ in rows], [[row for _, row in rows]], _same)

    def row(self, index: int) -> Scanned:
        return self.build(*[column[index] for column in self.columns])


def _same(row: Scanned) -> Scanned:
    return row


@dataclass(frozen=True)
class ScanEdge:
    """A row of a page and its position; its cursor is `ScanPage.cursor(edge)`."""

    at: bytes
    row: Scanned


@dataclass(frozen=True)
class ScanPage:
    """Edges in key order, whatever the direction read. `has_next_page` is computed when
    reading forwards, `has_previous_page` when reading backwards (the other is false, as
    Relay allows); both are true while a partition failed, since its rows are unknown.
    `cursor_at` encodes the cursor of an edge from its position."""

    edges: list[ScanEdge]
    has_next_page: bool = False
    has_previous_page: bool = False
    start_cursor: str | None = None
    end_cursor: str | None = None
    cursor_at: Callable[[bytes], str] | None = dataclasses.field(default=None, compare=False)

    def cursor(self, edge: ScanEdge) -> str:
        """The cursor of `edge` (one of this page's): paging on from it reads what follows."""
        assert self.cursor_at is not None, "a page with edges encodes their cursors"
        return self.cursor_at(edge.at)


def _merged(slices: Mapping[int, ScanSlice], backward: bool) -> Iterator[tuple[bytes, int, int]]:
    """(position, partition, index in its slice) of every row, in the order read: only the
    positions are compared, since no two partitions hold the same key."""
    streams = [
        zip(piece.positions, repeat(p), range(len(piece.positions)), strict=False)
        for p, piece in slices.items()
    ]
    return heapq.merge(*streams, reverse=backward)


def _passed(start: bytes | None, at: bytes, backward: bool) -> bytes:
    """A partition's position once the scan passed `at`: `at`, or its own if already past."""
    if start is None:
        return at
    return min(start, at) if backward else max(start, at)


def _cursor_at(start: ScanCursor, answered: Collection[int]) -> Callable[[bytes], str]:
    """The cursor after the edge at a position: each partition that answered stands at that
    edge (or past it), the others where they were."""
    encode = cursors.encoder(start)
    backward, starts = start.backward, start.positions

    def cursor_at(at: bytes) -> str:
        positions = tuple(
            _passed(position, at, backward) if p in answered else position
            for p, position in enumerate(starts)
        )
        return encode(at, positions)

    return cursor_at


def merge_page(
    start: ScanCursor,
    slices: Mapping[int, ScanSlice],
    size: int,
    failed: Collection[int],
) -> ScanPage:
    """The first `size` rows of `slices` in `start`'s direction from `start`'s positions;
    partitions in `failed` did not answer (nor do they have slices)."""
    backward = start.backward
    edges: list[ScanEdge] = []
    more = False
    for at, partition, index in _merged(slices, backward):
        if len(edges) == size:
            more = True
            break
        edges.append(ScanEdge(at, slices[partition].row(index)))
    more = more or bool(failed)
    if backward:
        edges.reverse()
    cursor_at = _cursor_at(start, frozenset(slices))
    first: str | None = None
    last: str | None = None
    if edges:
        first, last = cursor_at(edges[0].at), cursor_at(edges[-1].at)
    elif failed:  # nothing came, but paging on retries the partitions that failed
        first = last = cursors.encode(dataclasses.replace(start, at=None))
    return ScanPage(edges, more and not backward, more and backward, first, last, cursor_at)
