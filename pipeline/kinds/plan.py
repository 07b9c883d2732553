"""What a view kind provides: the streaming computation and its changelog records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

from schema import View

__all__ = ["ChangelogRecord", "KindPlan"]


@dataclass(frozen=True)
class ChangelogRecord:
    """One changelog row: `entity_key` picks the partition, `key` and `value` are written."""

    entity_key: str
    key: bytes
    value: bytes | None  # None: a tombstone, the key is deleted


@dataclass(frozen=True)
class KindPlan:
    """`aggregate` turns a view's keyed events (see `records.keyed_events`) into the rows
    it writes, in `output_mode`; `changelog` turns one micro-batch of those rows into
    absolute records (idempotent upserts, so a replayed batch is harmless). `drops_late`:
    a watermark drops late events, whose count (`late_dropped`) a view resuming from its
    checkpoint continues from its last published status. `appends`: the views whose rows
    Spark writes once, final, when the watermark passes them (append mode), instead of on
    every change (update mode).

    `records`, for the kinds Real-Time Mode can run: the same changelog records as Spark
    columns for its Kafka sink, `key` (the entity key, so the sink's default partitioner,
    murmur2 of the key's UTF-8 bytes, picks the partition `View.partition_of` does) and
    `value` (the JSON `changelog` writes; null: a tombstone). None: the kind's record keys
    are not the entity key, so it runs in micro-batches."""

    aggregate: Callable[[DataFrame, View], DataFrame]
    changelog: Callable[[pa.Table], Iterator[ChangelogRecord]]
    records: Callable[[DataFrame], DataFrame] | None = None
    drops_late: bool = False
    deletes: bool = False
    appends: Callable[[View], bool] = lambda view: False

    def output_mode(self, view: View) -> str:
        """Spark's output mode for `view`'s query."""
        return "append" if self.appends(view) else "update"
