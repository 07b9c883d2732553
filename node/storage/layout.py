"""The byte layout of a LevelDB partition store: its keys and how each value is encoded.

Every key is a tuple made by `schema.keycodec.pack`, so byte order is tuple order:

```
("meta", "format")                                -> b"1"
("row", view, key)                                -> >Qq   count, last_event_ms
("top", view, MAX_UINT - count, key)              -> >Qq   count, last_event_ms; UTF-8 key
("win", view, key, start_ms)                      -> >Qqq  count, end_ms, last_event_ms; JSON fields
("wtop", view, start_ms, MAX_UINT - count, key)   -> >Qqq  count, end_ms, last_event_ms; UTF-8 key
("wstart", view, start_ms, key)                   -> >Qqq  count, end_ms, last_event_ms; UTF-8 key
("wrank", view, field, start_ms, MAX_UINT - order, key) -> >Qqq  as "wtop"
("latest", view, key)                             -> >QQQ  event_ms, partition, offset; JSON fields
("rank", view, field, MAX_UINT - order, key)      -> >QQQ  event_ms, partition, offset; JSON fields
("hist", view, key, event_ms, partition, offset)  -> JSON fields
("offset", topic)                                 -> >Q    next offset to read
("total", view)                                   -> >QQ   keys, sum of counts (count views)
("wtotal", view, start_ms, end_ms)                -> >QQ   keys, sum of counts (per window)
("atotal", view)                                  -> JSON  keys, each numeric result's exact sum
("meta", "totals")                                -> b"1"  the totals are kept (see store)
("meta", "wstart")                                -> b"1"  the "wstart" index is kept
("meta", "wtotals")                               -> b"1"  window totals are per (start, end)
```

A window total is named by the window's start and end: the windows of every key share
them in tumbling and hopping views, but the sessions of two keys may start at the same
instant and end apart, and each such span has a total of its own. (Stores written before
held one total per start, with the last end written; `LevelDBStore.open` recounts them.)

A scan (`ScanSpan`) walks the rows of one view in the order of their key's tail after
the (kind, view) head: by key for count and latest rows, by (key, window start) for
windows, by (key, event time, partition, offset) for events; or an index's order (below).
`pack_str` keeps UTF-8 byte
order (NUL is escaped as 0x00 0xFF, the end is 0x00 0x01), so the rows of a key sort by
the key's UTF-8 bytes, a key before every key it is a prefix of.

"top" and "wtop" are indexes (count descending, then key ascending; "wtop" per window),
"wstart" orders every window by (start, key). "rank" indexes the latest rows of an
aggregate view by one numeric field (value descending, then key; `order_of`), "wrank" a
windowed aggregate view's windows by one numeric result per window start; a row whose
field is null or no number is not in them.
A window's JSON fields are a windowed aggregate view's results (none for windowed_count
views); the window indexes do not repeat them: a read by an index fills them from the
rows when asked (`results` of `PartitionStore.top_window` and `PartitionStore.scan`).
Index values repeat the row, so top-N reads never decode keys (measured: the generic key
decoder was half the cost of a top-1000 read).
"""

from __future__ import annotations

import enum
import functools
import math
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from node.errors import SerializationError
from node.storage.changes import EventPosition
from schema import (
    MAX_UINT,
    STR_TAG,
    CountRow,
    EventRow,
    WindowRow,
    escape_str,
    pack,
    pack_str,
    pack_uint,
    unpack,
)

__all__ = [
    "FORMAT",
    "FORMAT_KEY",
    "TOTALS_KEY",
    "WINDOW_STARTS_KEY",
    "WINDOW_TOTALS_KEY",
    "AggregateTotal",
    "CountKeys",
    "ResultTotal",
    "ScanSpan",
    "ScannedRow",
    "Table",
    "Total",
    "aggregate_total_key",
    "count_key",
    "count_keys",
    "count_prefix",
    "count_top_key",
    "count_top_prefix",
    "decode_aggregate_total",
    "decode_count",
    "decode_count_top",
    "decode_event",
    "decode_latest",
    "decode_offset",
    "decode_ranked",
    "decode_scanned",
    "decode_total",
    "decode_window",
    "decode_window_top",
    "encode_aggregate_total",
    "encode_count",
    "encode_event",
    "encode_latest",
    "encode_offset",
    "encode_total",
    "encode_window",
    "encode_window_index",
    "event_key",
    "event_prefix",
    "events_prefix",
    "int_at",
    "latest_key",
    "latest_keys",
    "latest_prefix",
    "offset_key",
    "offset_prefix",
    "order_of",
    "prefix_end",
    "rank_key",
    "rank_prefix",
    "total_key",
    "window_key",
    "window_prefix",
    "window_rank_key",
    "window_rank_prefix",
    "window_ranks_prefix",
    "window_start_key",
    "window_top_key",
    "window_top_prefix",
    "window_total_key",
    "window_total_prefix",
    "window_total_span",
]

FORMAT = b"1"
FORMAT_KEY = pack("meta", "format")
TOTALS_KEY = pack("meta", "totals")
WINDOW_STARTS_KEY = pack("meta", "wstart")
WINDOW_TOTALS_KEY = pack("meta", "wtotals")

_COUNT = struct.Struct(">Qq")
_WINDOW = struct.Struct(">Qqq")
_LATEST = struct.Struct(">QQQ")
_OFFSET = struct.Struct(">Q")
_TOTAL = struct.Struct(">QQ")
_UINT = _OFFSET
_PACKED_UINT = len(pack_uint(0))  # a packed integer key part: its type tag and 8 bytes


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key that starts with `prefix`."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of only 0xff bytes has no end")
    return stripped[:-1] + bytes([stripped[-1] + 1])


@functools.cache
def _head(kind: str, view: str) -> bytes:
    """The packed (kind, view) that starts every key of a view: packed once per view, as
    the per-record keys below are built on every changelog record of a restore."""
    return pack(kind, view)


def _corrupt(view: str, key: str, what: str, value: bytes) -> SerializationError:
    return SerializationError(
        f"view {view}: stored {what} of key {key!r} cannot be decoded: {value[:40]!r}"
    )


# -- count ---------------------------------------------------------------------------------


def count_key(view: str, key: str) -> bytes:
    return _head("row", view) + pack_str(key)


def count_keys(view: str, keys: list[str]) -> list[bytes]:
    """`count_key` of each of `keys`, the view's head looked up once (a lookup of many keys)."""
    head = _head("row", view)
    return [head + pack_str(key) for key in keys]


def count_prefix(view: str) -> bytes:
    return _head("row", view)


def count_top_key(view: str, count: int, key: str) -> bytes:
    return _head("top", view) + pack_uint(MAX_UINT - count) + pack_str(key)


class CountKeys:
    """The row and top-index keys of one count view, its heads looked up once: a write
    builds two or three per record, and the cached `_head` look-ups were a third of that."""

    __slots__ = ("_cut", "_row", "_top")

    def __init__(self, view: str):
        self._row, self._top = _head("row", view), _head("top", view)
        self._cut = len(self._row)

    def row(self, key: str) -> bytes:
        """`count_key` of `key`."""
        return self._row + pack_str(key)

    def top(self, count: int, row_key: bytes) -> bytes:
        """`count_top_key` from the key's `row` key, without packing the key again."""
        return self._top + pack_uint(MAX_UINT - count) + row_key[self._cut :]


def count_top_prefix(view: str) -> bytes:
    return pack("top", view)


def encode_count(row: CountRow) -> bytes:
    return _COUNT.pack(row.count, row.last_event_ms)


def decode_count(view: str, key: str, value: bytes) -> CountRow:
    try:
        count, last_event_ms = _COUNT.unpack(value)
    except struct.error as exc:
        raise _corrupt(view, key, "count row", value) from exc
    return CountRow(key=key, count=count, last_event_ms=last_event_ms)


def decode_count_top(value: bytes) -> CountRow:
    """A count row from its index entry (the row's value followed by the UTF-8 key)."""
    count, last_event_ms = _COUNT.unpack_from(value)
    return CountRow(value[_COUNT.size :].decode("utf-8"), count, last_event_ms)


# -- windowed_count ------------------------------------------------------------------------


def window_key(view: str, key: str, start_ms: int) -> bytes:
    return _head("win", view) + pack_str(key) + pack_uint(start_ms)


def window_prefix(view: str, *key: str) -> bytes:
    """The windows of `key`, or every window row of `view`."""
    return _head("win", view) + b"".join([pack_str(k) for k in key])


def window_top_key(view: str, start_ms: int, count: int, key: str) -> bytes:
    return _head("wtop", view) + pack_uint(start_ms) + pack_uint(MAX_UINT - count) + pack_str(key)


def window_start_key(view: str, start_ms: int, key: str) -> bytes:
    return _head("wstart", view) + pack_uint(start_ms) + pack_str(key)


def window_top_prefix(view: str, *start_ms: int) -> bytes:
    """The index of every window of `view`, or of the one starting at `start_ms`."""
    return pack("wtop", view, *start_ms)


def window_rank_key(view: str, field: str, start_ms: int, value: float, key: str) -> bytes:
    return (
        window_rank_prefix(view, field, start_ms)
        + pack_uint(MAX_UINT - order_of(value))
        + pack_str(key)
    )


def window_ranks_prefix(view: str) -> bytes:
    """The indexes of `view`'s windows by every result."""
    return pack("wrank", view)


def window_rank_prefix(view: str, field: str, *start_ms: int) -> bytes:
    """The index of `view`'s windows by the result `field`: every window's, or one's."""
    return pack("wrank", view, field, *start_ms)


def int_at(key: bytes, at: int) -> int:
    """The packed integer that starts at byte `at` of `key` (read without decoding the rest)."""
    value: int = _UINT.unpack_from(key, at + 1)[0]  # + 1: skip the type tag
    return value


def _window_header(row: WindowRow) -> bytes:
    return _WINDOW.pack(row.count, row.end_ms, row.last_event_ms)


def encode_window(row: WindowRow) -> bytes:
    """A window's row: its header, then its results' JSON (windowed aggregate views)."""
    header = _window_header(row)
    return header + orjson.dumps(row.fields) if row.fields else header


def encode_window_index(row: WindowRow) -> bytes:
    """A window's index entry: its header (count, end, newest event time), then its key."""
    return _window_header(row) + row.key.encode("utf-8")


def decode_window(view: str, key: str, start_ms: int, value: bytes) -> WindowRow:
    try:
        count, end_ms, last_event_ms = _WINDOW.unpack_from(value)
        fields = _fields(value[_WINDOW.size :]) if len(value) > _WINDOW.size else {}
    except (struct.error, orjson.JSONDecodeError, TypeError) as exc:
        raise _corrupt(view, key, "window", value) from exc
    return WindowRow(key, start_ms, end_ms, count, last_event_ms, fields)


def decode_window_top(start_ms: int, value: bytes) -> WindowRow:
    """A window from its index entry (the row's value followed by the UTF-8 key)."""
    count, end_ms, last_event_ms = _WINDOW.unpack_from(value)
    return WindowRow(value[_WINDOW.size :].decode("utf-8"), start_ms, end_ms, count, last_event_ms)


# -- latest --------------------------------------------------------------------------------


def latest_key(view: str, key: str) -> bytes:
    return _head("latest", view) + pack_str(key)


def latest_keys(view: str, keys: list[str]) -> list[bytes]:
    """`latest_key` of each of `keys`, the view's head looked up once."""
    head = _head("latest", view)
    return [head + pack_str(key) for key in keys]


def latest_prefix(view: str) -> bytes:
    return _head("latest", view)


def encode_latest(row: EventRow) -> bytes:
    header = _LATEST.pack(row.event_ms, row.source_partition, row.source_offset)
    return header + orjson.dumps(row.fields)


def decode_latest(view: str, key: str, value: bytes) -> EventRow:
    try:
        event_ms, partition, offset = _LATEST.unpack_from(value)
        fields = _fields(value[_LATEST.size :])
    except (struct.error, orjson.JSONDecodeError, TypeError) as exc:
        raise _corrupt(view, key, "latest event", value) from exc
    return EventRow(key, event_ms, partition, offset, fields)


def _fields(data: bytes) -> dict[str, Any]:
    fields = orjson.loads(data)
    if not isinstance(fields, dict):
        raise TypeError("event fields are not a JSON object")
    return fields


# -- rank (aggregate views) ----------------------------------------------------------------


def order_of(value: float) -> int:
    """An unsigned 64-bit integer that orders as the double `value` does: its IEEE bits,
    all flipped for a negative number, the sign bit set for the others. Integers are ranked
    as the double nearest them (exact up to 2**53), here and in `runtime.ranking`."""
    # + 0.0: -0.0 becomes 0.0, equal to it as `runtime.ranking.value_rank` compares them
    (bits,) = _UINT.unpack(struct.pack(">d", float(value) + 0.0))
    return bits ^ MAX_UINT if bits >> 63 else bits | (1 << 63)


def rank_prefix(view: str, field: str) -> bytes:
    return pack("rank", view, field)


def rank_key(view: str, field: str, value: float, key: str) -> bytes:
    return rank_prefix(view, field) + pack_uint(MAX_UINT - order_of(value)) + pack_str(key)


def decode_ranked(view: str, tail: bytes, value: bytes) -> EventRow:
    """A latest row from its rank entry: `tail` is the packed (order, key) after the
    `rank_prefix`, `value` the row's value."""
    try:
        _, key = unpack(tail)
    except (ValueError, IndexError, struct.error) as exc:
        raise _corrupt(view, "?", "rank entry", tail) from exc
    return decode_latest(view, str(key), value)


# -- history -------------------------------------------------------------------------------


def event_key(view: str, key: str, at: EventPosition) -> bytes:
    return _head("hist", view) + pack_str(key) + pack(*at)


def event_prefix(view: str, key: str, *event_ms: int) -> bytes:
    """The events of `key`, or those of `key` at the event time `event_ms`."""
    return pack("hist", view, key, *event_ms)


def events_prefix(view: str) -> bytes:
    """Every event of `view`, of every key."""
    return _head("hist", view)


def encode_event(row: EventRow) -> bytes:
    return orjson.dumps(row.fields)


def decode_event(view: str, key: str, tail: bytes, value: bytes) -> EventRow:
    """An event from its value and `tail`, the packed position after `event_prefix`."""
    try:
        event_ms, partition, offset = unpack(tail)
        fields = _fields(value)
    except (ValueError, TypeError, IndexError, struct.error) as exc:
        raise _corrupt(view, key, "event", tail + b" " + value) from exc
    if not all(isinstance(part, int) for part in (event_ms, partition, offset)):
        raise _corrupt(view, key, "event position", tail)
    return EventRow(key, int(event_ms), int(partition), int(offset), fields)


# -- offsets -------------------------------------------------------------------------------


def offset_key(topic: str) -> bytes:
    return pack("offset", topic)


def offset_prefix() -> bytes:
    return pack("offset")


def encode_offset(next_offset: int) -> bytes:
    return _OFFSET.pack(next_offset)


def decode_offset(value: bytes) -> int:
    offset: int = _OFFSET.unpack(value)[0]
    return offset


# -- scans ---------------------------------------------------------------------------------


class Table(enum.Enum):
    """The rows of a view kind a scan walks, by the kind part of their keys: by key, or,
    for TOP (the count index), by count descending then key; for WINDOW_TOP by window
    start, then count descending, then key; for WINDOW_START by window start, then key;
    for RANK (an aggregate view's index of one result, `ScanSpan.by`) by that result
    descending, then key."""

    COUNT = "row"
    WINDOW = "win"
    LATEST = "latest"
    EVENT = "hist"
    TOP = "top"
    WINDOW_TOP = "wtop"
    WINDOW_START = "wstart"
    RANK = "rank"

    def head(self, view: str, by: str = "") -> bytes:
        """What starts every key of the table's rows of `view` (of its result `by`, RANK)."""
        return rank_prefix(view, by) if self is Table.RANK else _head(self.value, view)

    @property
    def keyed(self) -> bool:
        """Whether its rows' tails start with the key (so a prefix and key range apply)."""
        return self in (Table.COUNT, Table.WINDOW, Table.LATEST, Table.EVENT)

    @property
    def timed(self) -> bool:
        """Whether its rows' tails start with a window start (so a time range applies)."""
        return self in (Table.WINDOW_TOP, Table.WINDOW_START)


ScannedRow = CountRow | WindowRow | EventRow


@dataclass(frozen=True)
class ScanSpan:
    """Which rows of a view a scan reads: keys that start with `prefix`, with `since` <=
    key < `until` (None: open) in UTF-8 byte order, or (for tables by window start) windows
    with `since_ms` <= start < `until_ms`, or (Table.RANK) the rows ranked by the result
    `by`; and of those the rows past `after` (a row's tail
    after the view head: exclusive; None: from the first row), walking forwards, or
    backwards from the last row when `backward` (`after` then bounds above)."""

    prefix: str = ""
    since: str | None = None
    until: str | None = None
    after: bytes | None = None
    backward: bool = False
    since_ms: int | None = None
    until_ms: int | None = None
    by: str = ""  # the result whose index (Table.RANK) is read

    def bounds(
        self, head: bytes, keyed: bool = True, timed: bool = False
    ) -> tuple[bytes, bytes] | None:
        """[start, stop) of the stored keys to read under `head`, or None when empty; the
        prefix and key range apply only to tails that start with the key (`keyed`), the
        time range only to those that start with a window start (`timed`)."""
        low, high = head, prefix_end(head)
        if timed:  # stored starts are never negative: an earlier bound means 0
            if self.since_ms is not None:
                low = head + pack_uint(max(0, self.since_ms))
            if self.until_ms is not None:
                high = head + pack_uint(max(0, self.until_ms))
        if keyed:
            low = head + STR_TAG + escape_str(self.prefix)
            high = prefix_end(low)
            if self.since is not None:
                low = max(low, head + pack_str(self.since))
            if self.until is not None:
                high = min(high, head + pack_str(self.until))
        if self.after is not None:
            if self.backward:
                high = min(high, head + self.after)
            else:  # the smallest byte string after it
                low = max(low, head + self.after + b"\x00")
        return (low, high) if low < high else None


def decode_scanned(table: Table, view: str, tail: bytes, value: bytes) -> ScannedRow:
    """The row stored under a key whose tail after the view head is `tail`."""
    if table is Table.TOP:
        return decode_count_top(value)
    if table is Table.RANK:
        return decode_ranked(view, tail, value)
    if table.timed:
        return decode_window_top(int_at(tail, 0), value)
    try:
        parts = unpack(tail)
        key = parts[0]
        if not isinstance(key, str):
            raise ValueError("no key")
    except (ValueError, IndexError, struct.error) as exc:
        raise SerializationError(f"view {view}: stored key {tail[:60]!r} cannot be read") from exc
    if table is Table.COUNT:
        return decode_count(view, key, value)
    if table is Table.LATEST:
        return decode_latest(view, key, value)
    if table is Table.WINDOW:
        if len(parts) != 2 or not isinstance(parts[1], int):
            raise _corrupt(view, key, "window key", tail)
        return decode_window(view, key, parts[1], value)
    return decode_event(view, key, tail[len(pack_str(key)) :], value)


# -- totals --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Total:
    """What a partition holds of a view (of one window, for windowed views): its number of
    keys and the sum of their counts."""

    keys: int = 0
    count: int = 0

    def __add__(self, other: Total) -> Total:
        return Total(self.keys + other.keys, self.count + other.count)


def total_key(view: str) -> bytes:
    return pack("total", view)


def window_total_key(view: str, start_ms: int, end_ms: int) -> bytes:
    return _head("wtotal", view) + pack_uint(start_ms) + pack_uint(end_ms)


def window_total_prefix(view: str, *start_ms: int) -> bytes:
    """The totals of every window of `view`, or of those starting at `start_ms`."""
    return pack("wtotal", view, *start_ms)


def window_total_span(total_key: bytes, cut: int) -> tuple[int, int]:
    """The (start, end) of the window whose total is stored under `total_key`, read after
    its `cut` bytes of (kind, view) head."""
    return int_at(total_key, cut), int_at(total_key, cut + _PACKED_UINT)


def encode_total(total: Total) -> bytes:
    return _TOTAL.pack(total.keys, total.count)


def decode_total(value: bytes) -> Total:
    keys, count = _TOTAL.unpack(value)
    return Total(keys, count)


# A sum of doubles kept exactly: a whole number of the smallest step between doubles
# (2**-1074), so adding and removing values never rounds, and a sum that passes the largest
# double on the way (and comes back) still ends as the exact total, rounded once when read.
_STEPS = 1 << 1074


def exact_steps(value: float) -> int:
    """`value` as a whole number of steps of 2**-1074 (exact for every finite double)."""
    numerator, denominator = value.as_integer_ratio()
    return numerator * (_STEPS // denominator)


def rounded_sum(steps: int) -> float:
    """The double nearest to `steps` steps of 2**-1074; an infinity past the largest."""
    try:
        return steps / _STEPS  # int / int rounds correctly
    except OverflowError:
        return math.inf if steps > 0 else -math.inf


@dataclass(frozen=True)
class AggregateTotal:
    """What a partition holds of an aggregate view: its number of keys and the sum over
    them of each numeric result, exact (`exact_steps`; `rounded_sum` reads one)."""

    keys: int = 0
    sums: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: AggregateTotal) -> AggregateTotal:
        sums = dict(self.sums)
        for name, value in other.sums:
            sums[name] = sums.get(name, 0) + value
        return AggregateTotal(self.keys + other.keys, tuple(sorted(sums.items())))


def aggregate_total_key(view: str) -> bytes:
    return pack("atotal", view)


def encode_aggregate_total(total: AggregateTotal) -> bytes:
    """JSON with each exact sum as a decimal string (a few hundred digits at most)."""
    return orjson.dumps({"keys": total.keys, "sums": {k: str(v) for k, v in total.sums}})


def _steps_of(value: Any) -> int:
    if isinstance(value, str):
        return int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):  # stored as a double
        return exact_steps(float(value))  # before sums were exact
    raise TypeError(f"a sum of {type(value).__name__}")


def decode_aggregate_total(view: str, value: bytes) -> AggregateTotal:
    try:
        doc = orjson.loads(value)
        sums = tuple(sorted((str(k), _steps_of(v)) for k, v in doc["sums"].items()))
        return AggregateTotal(int(doc["keys"]), sums)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SerializationError(f"view {view}: undecodable aggregate total {value!r}") from exc


@dataclass(frozen=True)
class ResultTotal:
    """One numeric result of an aggregate view over a partition's keys: its sum, least and
    greatest value (None: no key has a value of it)."""

    name: str
    sum: float | None
    min: float | None
    max: float | None
