"""Offset bookkeeping and read-task planning: pure functions, no Kafka, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.offsets import (
    OffsetRange,
    cap_offsets,
    decode_offsets,
    encode_offsets,
    group_ranges,
    ranges_between,
)

offsets = st.dictionaries(st.integers(0, 63), st.integers(0, 10**12), max_size=12)


@given(offsets)
def test_offsets_round_trip_through_the_checkpoint_form(value: dict[int, int]) -> None:
    assert decode_offsets(encode_offsets(value)) == value


def test_equal_offsets_encode_to_equal_json_whatever_the_order() -> None:
    # Spark compares offsets as JSON text: partition 10 must not sort before partition 2
    assert list(encode_offsets({10: 1, 2: 5, 0: 7})) == ["0", "2", "10"]
    assert encode_offsets({1: 2, 0: 3}) == encode_offsets({0: 3, 1: 2})


def test_decoding_rejects_what_is_not_partition_offsets() -> None:
    with pytest.raises(ValueError, match="partition"):
        decode_offsets({"zero": 1})


def test_ranges_skip_empty_partitions_and_start_new_ones_at_zero() -> None:
    start = {0: 5, 1: 9, 2: 0}
    end = {0: 8, 1: 9, 2: 4, 3: 2}
    assert ranges_between(start, end) == [
        OffsetRange(0, 5, 8),
        OffsetRange(2, 0, 4),
        OffsetRange(3, 0, 2),
    ]


def test_six_partitions_become_two_balanced_tasks() -> None:
    ranges = [OffsetRange(p, 0, n) for p, n in enumerate([100, 10, 60, 50, 5, 40])]
    groups = group_ranges(ranges, 2)
    assert len(groups) == 2
    totals = sorted(sum(r.size for r in g) for g in groups)
    assert totals == [125, 140]
    assert sorted(r.partition for g in groups for r in g) == list(range(6))


def test_fewer_ranges_than_tasks_give_one_task_per_range() -> None:
    assert group_ranges([OffsetRange(3, 0, 1)], 2) == [(OffsetRange(3, 0, 1),)]
    assert group_ranges([], 2) == []
    with pytest.raises(ValueError, match="task"):
        group_ranges([], 0)


@given(
    st.lists(st.integers(1, 10_000), min_size=1, max_size=24),
    st.integers(1, 4),
)
def test_grouping_keeps_every_range_once_and_is_balanced(sizes: list[int], tasks: int) -> None:
    ranges = [OffsetRange(p, 0, n) for p, n in enumerate(sizes)]
    groups = group_ranges(ranges, tasks)
    assert len(groups) == min(tasks, len(ranges))
    assert sorted(r.partition for g in groups for r in g) == list(range(len(sizes)))
    totals = [sum(r.size for r in g) for g in groups]
    # greedy largest-first: no task exceeds the ideal share by more than the largest range
    assert max(totals) <= sum(sizes) / len(groups) + max(sizes)


def test_a_row_cap_is_shared_between_partitions() -> None:
    capped = cap_offsets({0: 0, 1: 100, 2: 7}, {0: 1000, 1: 103, 2: 7, 3: 50}, 100)
    assert capped[1] == 103  # a small backlog is read whole
    assert capped[2] == 7
    assert sum(capped[p] - s for p, s in {0: 0, 1: 100, 2: 7, 3: 0}.items()) == 100
    assert capped[0] - 0 >= 40 and capped[3] >= 40


@given(offsets, offsets, st.integers(1, 10_000))
def test_a_capped_end_never_passes_the_cap_or_goes_backwards(
    start: dict[int, int], end: dict[int, int], cap: int
) -> None:
    capped = cap_offsets(start, end, cap)
    assert set(capped) == set(end)
    for p, e in capped.items():
        assert start.get(p, 0) <= e <= max(end[p], start.get(p, 0))
    total = sum(r.size for r in ranges_between(start, capped))
    available = sum(r.size for r in ranges_between(start, end))
    assert total == min(cap, available)
