"""The one top-N order and merge: per-partition local tops, merged and cut, are the top of
all rows, ties and order included."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from runtime.ranking import merge_top, rank
from schema import partition_for


@dataclass(frozen=True)
class _Row:
    key: str
    count: int


_ROWS = st.dictionaries(st.text(max_size=4), st.integers(0, 5), max_size=40).map(
    lambda counts: [_Row(key, count) for key, count in counts.items()]
)


@given(_ROWS, st.integers(1, 8), st.integers(1, 12))
def test_merged_local_tops_are_the_top_of_the_union(
    rows: list[_Row], partitions: int, limit: int
) -> None:
    by_partition: dict[int, list[_Row]] = {p: [] for p in range(partitions)}
    for row in rows:
        by_partition[partition_for(row.key, partitions)].append(row)
    local_tops = [sorted(part, key=rank)[:limit] for part in by_partition.values()]
    assert merge_top(local_tops, limit) == sorted(rows, key=rank)[:limit]


@given(_ROWS, st.integers(1, 12))
def test_partials_in_any_order_are_ranked_first(rows: list[_Row], limit: int) -> None:
    # a node's answer is a partial the gateway does not trust to be in order
    assert merge_top([list(reversed(rows))], limit) == sorted(rows, key=rank)[:limit]


def test_count_descending_then_key_ascending() -> None:
    rows = [_Row("b", 2), _Row("a", 1), _Row("c", 2), _Row("a2", 1)]
    assert merge_top([rows[:2], rows[2:]], 3) == [_Row("b", 2), _Row("c", 2), _Row("a", 1)]
