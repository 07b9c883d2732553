"""The scan field of every view (e.g. allWordCounts): for each partition asked, its next
slice of rows in key order from that partition's own position, and no row past it.

```graphql
input SliceInput { partition: Int!  after: String }
type WordCountSlice { partition: Int!  rows: JSON! }
allWordCounts(slices: [SliceInput!]!, first: Int!, backward: Boolean! = false,
              prefix: String! = "", from: String, to: String,
              order: ScanOrder! = KEY): [WordCountSlice!]!    # `order`: count views only
allHostAccessWindows(..., order: ScanOrder! = KEY, startFrom: DateTime, startTo: DateTime)
```

A slice's rows are one JSON value, packed in columns (`SCAN_ROWS`): a few thousand
rows as GraphQL objects cost the node ~80 ms of field resolution per request, against
~4 ms of LevelDB. A position is the lowercase hex of a row's key tail after the view head
(`node.storage.layout.ScanSpan`): the exclusive start of the partition's next slice (its end when
`backward`); hex, unlike base64, keeps the tails' byte order and is cheap both ways. Rows
are ordered by the UTF-8 bytes of the key, then the window start or the event position;
or, for count views with `order: COUNT`, by count descending then key (the "top" index: no
prefix or key range); for windowed views with `order: START` by (window start, key), with
`order: COUNT` by (window start, count desc, key), both only for windows with
startFrom <= start < startTo; for aggregate views with `order: RESULT, by: "<result>"` by
that result descending, then key (its rank index: rows without a number there are out).
The gateway merges the slices (gateway.model.scans).
"""

# No `from __future__ import annotations`: strawberry must see the types, not strings.

import enum
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Any

import strawberry
from strawberry.scalars import JSON
from strawberry.types.field import StrawberryField

from node.errors import BadRequestError
from node.storage.layout import ScannedRow, ScanSpan, Table
from node.storage.store import PartitionStore
from node.subgraph.fields.common import given, query_field, read_each
from node.subgraph.fields.context import ReadContext, context_of
from node.subgraph.fields.ranked import check_ranked
from node.times import time_range
from schema import CountRow, EventRow, View, WindowRow, field_value, wire_value

__all__ = [
    "MAX_SLICE_ROWS",
    "SCAN_ROWS",
    "Columns",
    "ScanOrder",
    "SliceInput",
    "count_columns",
    "decode_position",
    "encode_position",
    "event_columns",
    "scan_field",
    "window_columns",
]

# the gateway asks one row more than its largest page (10,000) to learn whether more follow
MAX_SLICE_ROWS = 10_001
_MAX_POSITION_CHARS = 1 << 16

SCAN_ROWS = (
    "A slice's rows packed in columns, one JSON object of equally long arrays: `a` the rows' "
    "positions (lowercase hex of the key tail), `k` their keys, then by view kind: count "
    "`c` (counts); windowed_count `s`, `e` (window start and end, ms since the epoch) and `c`; "
    "latest and history `t` (event time, ms since the epoch) and `v0`, `v1`, ... (the value "
    "fields in catalogue order; null where missing or not of the field's scalar); aggregate "
    "views' results as `v0`, `v1`, ... after `t`, or after `c` for windowed aggregate views."
)


# a slice's rows as the columns of SCAN_ROWS after `a`: what each view kind packs
Columns = Callable[[Sequence[Any]], dict[str, list[Any]]]


@strawberry.enum(
    description="The order of a scan: by key, by count (desc, then key; per window for "
    "windowed views), by window start (then key), or by an aggregate view's result `by` "
    "(desc, then key; rows without a number there are left out)."
)
class ScanOrder(enum.Enum):
    KEY = "KEY"
    COUNT = "COUNT"
    START = "START"
    RESULT = "RESULT"


@strawberry.input(description="Where one partition's slice starts: after `after` (a position).")
class SliceInput:
    partition: int
    after: str | None = None


def encode_position(tail: bytes) -> str:
    return tail.hex()


def decode_position(view: View, position: str) -> bytes:
    """The key tail a position names; BAD_USER_INPUT for what is no hex."""
    try:
        if len(position) > _MAX_POSITION_CHARS:
            raise ValueError("too long")
        tail = bytes.fromhex(position)
        if 2 * len(tail) != len(position):  # fromhex skips spaces
            raise ValueError("not only hex digits")
    except ValueError as exc:
        shown = position if len(position) <= 40 else position[:40] + "..."
        raise BadRequestError(view.name, f"slice position {shown!r} is no position") from exc
    return tail


def count_columns(rows: Sequence[CountRow]) -> dict[str, list[Any]]:
    return {"k": [r.key for r in rows], "c": [r.count for r in rows]}


def window_columns(view: View) -> Columns:
    """The columns of `view`'s windows: their bounds and count, then their results."""

    def columns(rows: Sequence[WindowRow]) -> dict[str, list[Any]]:
        packed: dict[str, list[Any]] = {
            "k": [r.key for r in rows],
            "s": [r.start_ms for r in rows],
            "e": [r.end_ms for r in rows],
            "c": [r.count for r in rows],
        }
        return _value_columns(view, rows, packed)

    return columns


def event_columns(view: View) -> Columns:
    """The columns of `view`'s events: the value fields as its event type shows them."""

    def columns(rows: Sequence[EventRow]) -> dict[str, list[Any]]:
        packed: dict[str, list[Any]] = {
            "k": [r.key for r in rows],
            "t": [r.event_ms for r in rows],
        }
        return _value_columns(view, rows, packed)

    return columns


def _value_columns(
    view: View, rows: Sequence[EventRow | WindowRow], packed: dict[str, list[Any]]
) -> dict[str, list[Any]]:
    """`packed` with `v0`, `v1`, ...: each of the view's row fields, as its type shows it."""
    for index, spec in enumerate(view.row_fields):
        name, kind = spec.name, spec.type
        packed[f"v{index}"] = [
            wire_value(kind, field_value(kind, r.fields.get(name))) for r in rows
        ]
    return packed


def _slice_type(view: View) -> type:
    name = f"{view.type_name}Slice"
    namespace = {
        "__annotations__": {"partition": int, "rows": JSON},
        "rows": strawberry.field(description=SCAN_ROWS),
    }
    return strawberry.type(type(name, (), namespace), name=name)


KeyBound = Annotated[str | None, strawberry.argument(name="from")]
KeyEnd = Annotated[str | None, strawberry.argument(name="to")]
StartFrom = Annotated[datetime | None, strawberry.argument(name="startFrom")]
StartTo = Annotated[datetime | None, strawberry.argument(name="startTo")]


def scan_field(
    view: View,
    table: Table,
    columns: Columns,
    horizon: Callable[[ReadContext], int] | None = None,
    orders: dict[ScanOrder, Table] | None = None,
) -> dict[str, StrawberryField]:
    """`view.scan_field`: slices of `table`'s rows, packed by `columns` (SCAN_ROWS);
    windows ending at or before `horizon(context)` are expired and skipped. With `orders`
    (other orders than KEY and the index each reads), an `order` argument, and startFrom
    and startTo when an index is by window start."""
    slice_type = _slice_type(view)
    tables = {ScanOrder.KEY: table, **(orders or {})}

    def reader(
        scanned: Table, span: ScanSpan, first: int, horizon_ms: int
    ) -> Callable[[PartitionStore], list[tuple[bytes, ScannedRow]]]:
        results = bool(view.row_fields)  # windows read by an index need their results
        return lambda store: store.scan(view.name, scanned, span, first, horizon_ms, results)

    def answer(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        chosen: tuple[Table, Callable[[bytes | None], ScanSpan]],
    ) -> list[Any]:
        if not 1 <= first <= MAX_SLICE_ROWS:
            raise BadRequestError(view.name, f"first must be in 1..{MAX_SLICE_ROWS}, got {first}")
        scanned, span_of = chosen
        context = context_of(info)
        horizon_ms = -1 if horizon is None else horizon(context)
        readers = {}
        for piece in slices:
            if piece.partition in readers:  # one slice per partition: which was meant?
                raise BadRequestError(
                    view.name, f"slices name partition {piece.partition} twice: one slice each"
                )
            after = None if piece.after is None else decode_position(view, piece.after)
            readers[piece.partition] = reader(scanned, span_of(after), first, horizon_ms)
        found = read_each(view, context, readers)
        return [slice_type(partition=p, rows=packed(rows)) for p, rows in found.items()]

    def packed(rows: list[tuple[bytes, ScannedRow]]) -> dict[str, list[Any]]:
        return {
            "a": [encode_position(tail) for tail, _ in rows],
            **columns([row for _, row in rows]),
        }

    def spans(
        backward: bool,
        keys: tuple[str, str | None, str | None],
        order: ScanOrder,
        starts: tuple[datetime | None, datetime | None] = (None, None),
        by: str | None = None,
    ) -> tuple[Table, Callable[[bytes | None], ScanSpan]]:
        scanned = tables.get(order)
        if scanned is None:
            raise BadRequestError(view.name, f"order {order.value} is not one of this view's")
        prefix, since, until = keys
        if not scanned.keyed and (prefix or since is not None or until is not None):
            raise BadRequestError(view.name, "prefix, from and to apply to the key order only")
        if not scanned.timed and starts != (None, None):
            raise BadRequestError(view.name, "startFrom and startTo apply to START and COUNT")
        if (scanned is Table.RANK) != (by is not None):
            raise BadRequestError(view.name, "by goes with order: RESULT, and only with it")
        if by is not None:
            check_ranked(view, by)
        since_ms, until_ms = time_range(view, *starts)
        return scanned, lambda after: ScanSpan(
            prefix, since, until, after, backward, since_ms, until_ms, by or ""
        )

    def scan(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        keys = (prefix, given(since), given(until))
        return answer(info, slices, first, spans(backward, keys, ScanOrder.KEY))

    def scan_in_order(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        order: ScanOrder = ScanOrder.KEY,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        keys = (prefix, given(since), given(until))
        return answer(info, slices, first, spans(backward, keys, order))

    def scan_in_time_order(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        order: ScanOrder = ScanOrder.KEY,
        start_from: StartFrom = strawberry.UNSET,
        start_to: StartTo = strawberry.UNSET,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        keys = (prefix, given(since), given(until))
        starts = (given(start_from), given(start_to))
        return answer(info, slices, first, spans(backward, keys, order, starts))

    def scan_ranked(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        order: ScanOrder = ScanOrder.KEY,
        by: str | None = strawberry.UNSET,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        keys = (prefix, given(since), given(until))
        return answer(info, slices, first, spans(backward, keys, order, by=given(by)))

    resolver = scan
    if any(t.timed for t in tables.values()):
        resolver = scan_in_time_order
    elif Table.RANK in tables.values():
        resolver = scan_ranked
    elif orders:
        resolver = scan_in_order
    return {view.scan_field: query_field(resolver, view.scan_field)}
