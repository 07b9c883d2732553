"""Top-N order and the merge of partial tops, shared by the node (its partitions' tops) and
the gateway (the nodes' tops): count descending, then key ascending; for the rows of an
aggregate view, one numeric field's value descending (as a double), then key ascending.

A partition's top `limit` rows, merged with the others' and cut to `limit`, is the top
`limit` of all rows, since each key lives in one partition.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["Rankable", "is_rankable", "merge_top", "rank", "value_rank"]


class Rankable(Protocol):
    """A row with a key and a count (a count row, or the count of one window)."""

    @property
    def key(self) -> str: ...

    @property
    def count(self) -> int: ...


def rank(row: Rankable) -> tuple[int, str]:
    """Top-N order: count descending, then key ascending."""
    return (-row.count, row.key)


def is_rankable(value: Any) -> bool:
    """Whether a row's field value has a place in a ranking by it: a finite number."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def value_rank(value: float, key: str) -> tuple[float, str]:
    """Ranking order of a row by a numeric field: its value as a double descending (as a
    node's rank index stores it), then key ascending."""
    return (-float(value), key)


T = TypeVar("T")


def merge_top(
    tops: Iterable[Iterable[T]],
    limit: int,
    order: Callable[[T], Any] = rank,  # type: ignore[assignment]
) -> list[T]:
    """The first `limit` rows, in `order` (default: `rank`), of partial tops (each put in
    that order first, since a partial may come from a node)."""
    ordered = [sorted(top, key=order) for top in tops]
    return list(itertools.islice(heapq.merge(*ordered, key=order), limit))
