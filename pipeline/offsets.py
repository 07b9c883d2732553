"""Kafka offsets as Spark sees them: one JSON object `{"<partition>": next_offset}` per topic.

Pure planning logic (no Kafka, no Spark): which offset ranges a micro-batch reads, how
they are grouped into read tasks, and how a per-trigger row cap is shared out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OffsetRange",
    "cap_offsets",
    "decode_offsets",
    "encode_offsets",
    "group_ranges",
    "ranges_between",
]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets `start` (inclusive) to `end` (exclusive) of one partition."""

    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def encode_offsets(offsets: Mapping[int, int]) -> dict[str, int]:
    """The checkpoint form; keys sorted numerically so equal offsets give equal JSON."""
    return {str(p): int(offsets[p]) for p in sorted(offsets)}


def decode_offsets(doc: Mapping[str, Any]) -> dict[int, int]:
    """Parse the checkpoint form back into `{partition: next_offset}`."""
    try:
        return {int(p): int(o) for p, o in doc.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"offsets {dict(doc)!r} are not {{partition: offset}}") from exc


def ranges_between(start: Mapping[int, int], end: Mapping[int, int]) -> list[OffsetRange]:
    """The non-empty ranges from `start` to `end`; a partition new in `end` starts at 0."""
    ranges = [OffsetRange(p, start.get(p, 0), e) for p, e in sorted(end.items())]
    return [r for r in ranges if r.size > 0]


def group_ranges(ranges: Sequence[OffsetRange], tasks: int) -> list[tuple[OffsetRange, ...]]:
    """Split `ranges` into at most `tasks` groups of similar row counts (largest first)."""
    if tasks < 1:
        raise ValueError(f"read task count must be >= 1, got {tasks}")
    groups: list[list[OffsetRange]] = [[] for _ in range(min(tasks, len(ranges)))]
    totals = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: (-r.size, r.partition)):
        lightest = totals.index(min(totals))
        groups[lightest].append(r)
        totals[lightest] += r.size
    return [tuple(sorted(g, key=lambda r: r.partition)) for g in groups]


def cap_offsets(start: Mapping[int, int], end: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """`end` moved back so that at most `max_rows` offsets lie between `start` and it.

    The budget is shared round-robin over the partitions with data, so a busy partition
    cannot starve the others; every partition's end stays >= its start.
    """
    if max_rows < 1:
        raise ValueError(f"row cap must be >= 1, got {max_rows}")
    ranges = ranges_between(start, end)
    capped = {p: max(e, start.get(p, 0)) for p, e in end.items()}
    if sum(r.size for r in ranges) <= max_rows:
        return capped
    budget = max_rows
    take = {r.partition: 0 for r in ranges}
    open_ranges = sorted(ranges, key=lambda r: r.size)
    while budget > 0 and open_ranges:
        share = max(1, budget // len(open_ranges))
        still_open = []
        for r in open_ranges:
            extra = min(share, r.size - take[r.partition], budget)
            take[r.partition] += extra
            budget -= extra
            if take[r.partition] < r.size:
                still_open.append(r)
        open_ranges = still_open
    for r in ranges:
        capped[r.partition] = r.start + take[r.partition]
    return capped
