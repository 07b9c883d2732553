"""How the gateway cache holds a row: one flat tuple of atoms per entry.

An entry is (generation, as_of, size, *row): the generation of the partition's follow it is
exact in, the next changelog offset of the view's topic whose records are all in it, its
estimated size in bytes, and the row packed as () when there is none, (count,) for a count
view, (event time, field names, *values) for an event (the names one shared tuple per view).
The garbage collector untracks such a tuple once it survived a collection (not one that
holds a dict, an object or a tuple not yet untracked), so a full collection does not walk
the cache's rows: with objects per entry, collections paused the gateway for up to 0.6 s at
226,000 entries (issue 31).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.model.rows import Event, Row
from gateway.reads.kinds import to_row
from gateway.reads.protocol import CachedRow
from schema import View

__all__ = [
    "AS_OF",
    "ENTRY_OVERHEAD_BYTES",
    "GENERATION",
    "ROW",
    "SIZE",
    "Entry",
    "change_entry",
    "least_size",
    "packed",
    "read_entry",
    "unpacked",
]

ENTRY_OVERHEAD_BYTES = 200  # per entry besides its key and row JSON: dict slots, objects
Entry = tuple[Any, ...]
GENERATION, AS_OF, SIZE, ROW = range(4)
_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}  # each events' names tuple, once


def packed(row: Row | Event | None) -> tuple[Any, ...]:
    """A row as an entry holds it (see Entry)."""
    if row is None:
        return ()
    if isinstance(row, Row):
        return (row.count,)
    names = tuple(row.values)
    return (row.event_time, _NAMES.setdefault(names, names), *row.values.values())


def least_size(key: str) -> int:
    """The estimated size of an entry of `key` before its row: the fixed overhead and the key."""
    return ENTRY_OVERHEAD_BYTES + 2 * len(key)


def change_entry(view: View, key: str, row: Mapping[str, Any] | None) -> tuple[Entry, int]:
    """A changelog row (of a change or a snapshot) as an entry holds it, and its size."""
    size = least_size(key)
    if row is not None:
        size += len(orjson.dumps(row))
    return packed(None if row is None else to_row(view, key, row)), size


def read_entry(key: str, row: CachedRow) -> tuple[Entry, int]:
    """A row a node read answered as an entry holds it, and its size (as a changelog
    row's: its packed values as JSON)."""
    held = packed(row)
    size = least_size(key)
    if held:
        size += len(orjson.dumps(held, default=str))
    return held, size


def unpacked(key: str, entry: Entry) -> CachedRow:
    """The row a lookup answers, from the entry."""
    size = len(entry)
    if size == ROW:
        return None
    if size == ROW + 1:
        return Row(key, entry[ROW])
    return Event(key, entry[ROW], dict(zip(entry[ROW + 1], entry[ROW + 2 :], strict=True)))
