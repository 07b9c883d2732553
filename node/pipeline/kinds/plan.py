"""What a view kind provides: the streaming aggregation and its changelog records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

__all__ = ["ChangelogRecord", "KindPlan"]


@dataclass(frozen=True)
class ChangelogRecord:
    """One changelog row: `entity_key` picks the partition, `key` and `value` are written."""

    entity_key: str
    key: bytes
    value: bytes


@dataclass(frozen=True)
class KindPlan:
    """`aggregate` turns keyed events (key, event_ms, value) into the view's rows, run in
    update mode; `changelog` turns one micro-batch of those rows into absolute records."""

    aggregate: Callable[[DataFrame], DataFrame]
    changelog: Callable[[pa.Table], Iterator[ChangelogRecord]]
