"""Event rows (latest and history views) from a micro-batch's Arrow table."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from schema import EventRow

__all__ = ["event_rows"]


def event_rows(rows: pa.Table) -> Iterator[EventRow]:
    """One `EventRow` per row of columns key, event_ms, partition, offset, fields."""
    for row in rows.to_pylist():
        yield EventRow(
            key=row["key"],
            event_ms=row["event_ms"],
            source_partition=row["partition"],
            source_offset=row["offset"],
            fields=row["fields"] or {},
        )
