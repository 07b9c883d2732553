"""Top-N order and the merge of partial tops, shared by the node (its partitions' tops) and
the gateway (the nodes' tops): count descending, then key ascending.

A partition's top `limit` rows, merged with the others' and cut to `limit`, is the top
`limit` of all rows, since each key lives in one partition.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import Protocol, TypeVar

__all__ = ["Rankable", "merge_top", "rank"]


class Rankable(Protocol):
    """A row with a key and a count (a count row, or the count of one window)."""

    @property
    def key(self) -> str: ...

    @property
    def count(self) -> int: ...


R = TypeVar("R", bound=Rankable)


def rank(row: Rankable) -> tuple[int, str]:
    """Top-N order: count descending, then key ascending."""
    return (-row.count, row.key)


def merge_top(tops: Iterable[Iterable[R]], limit: int) -> list[R]:
    """The first `limit` rows, in rank order, of partial tops (each put in rank order first,
    since a partial may come from a node)."""
    ordered = [sorted(top, key=rank) for top in tops]
    return list(itertools.islice(heapq.merge(*ordered, key=rank), limit))
