"""The scan field of every view (e.g. allWordCounts): for each partition asked, its next
slice of rows in key order from that partition's own position, and no row past it.

```graphql
input SliceInput { partition: Int!  after: String }
type WordCountSlice { partition: Int!  edges: [WordCountScanEdge!]! }
type WordCountScanEdge { position: String!  node: WordCount! }
allWordCounts(slices: [SliceInput!]!, first: Int!, backward: Boolean! = false,
              prefix: String! = "", from: String, to: String,
              order: ScanOrder! = KEY): [WordCountSlice!]!    # `order`: count views only
```

A position is the unpadded base64url of a row's key tail after the view head
(`node.layout.ScanSpan`): the exclusive start of the partition's next slice (its end when
`backward`). Rows are ordered by the UTF-8 bytes of the key, then the window start or the
event position; or, for count views with `order: COUNT`, by count descending then key
(the "top" index: no prefix or key range). The gateway merges the slices (gateway.scans).
"""

# No `from __future__ import annotations`: strawberry must see the types, not strings.

import base64
import binascii
import enum
from collections.abc import Callable
from typing import Annotated, Any

import strawberry
from strawberry.types.field import StrawberryField

from node.errors import BadRequestError
from node.fields.common import given, query_field, read_each
from node.fields.context import ReadContext, context_of
from node.layout import ScannedRow, ScanSpan, Table
from node.store import PartitionStore
from schema import View

__all__ = [
    "MAX_SLICE_ROWS",
    "ScanOrder",
    "SliceInput",
    "decode_position",
    "encode_position",
    "scan_field",
]

# the gateway asks one row more than its largest page (10,000) to learn whether more follow
MAX_SLICE_ROWS = 10_001
_MAX_POSITION_CHARS = 1 << 16


@strawberry.enum(description="The order of a scan: by key, or by count (desc, then key).")
class ScanOrder(enum.Enum):
    KEY = "KEY"
    COUNT = "COUNT"


@strawberry.input(description="Where one partition's slice starts: after `after` (a position).")
class SliceInput:
    partition: int
    after: str | None = None


def encode_position(tail: bytes) -> str:
    return base64.urlsafe_b64encode(tail).rstrip(b"=").decode("ascii")


def decode_position(view: View, position: str) -> bytes:
    """The key tail a position names; BAD_USER_INPUT for what is no base64url."""
    try:
        if len(position) > _MAX_POSITION_CHARS:
            raise ValueError("too long")
        return base64.b64decode(
            position + "=" * (-len(position) % 4), altchars=b"-_", validate=True
        )
    except (binascii.Error, ValueError) as exc:
        shown = position if len(position) <= 40 else position[:40] + "..."
        raise BadRequestError(view.name, f"slice position {shown!r} is no position") from exc


def _types(view: View, node_type: type) -> tuple[type, type]:
    name = view.type_name
    edge = type(f"{name}ScanEdge", (), {"__annotations__": {"position": str, "node": node_type}})
    edge_type = strawberry.type(edge, name=f"{name}ScanEdge")
    piece = type(
        f"{name}Slice",
        (),
        {"__annotations__": {"partition": int, "edges": list[edge_type]}},  # type: ignore[valid-type]
    )
    return edge_type, strawberry.type(piece, name=f"{name}Slice")


def scan_field(
    view: View,
    table: Table,
    node_type: type,
    to_type: Callable[[Any], Any],
    horizon: Callable[[ReadContext], int] | None = None,
    by_count: Table | None = None,
) -> dict[str, StrawberryField]:
    """`view.scan_field`: slices of `table`'s rows, each row shown as `to_type(row)`;
    windows ending at or before `horizon(context)` are expired and skipped. With
    `by_count` (the count index), an `order` argument: COUNT reads that table instead."""
    edge_type, slice_type = _types(view, node_type)

    def reader(
        scanned: Table, span: ScanSpan, first: int, horizon_ms: int
    ) -> Callable[[PartitionStore], list[tuple[bytes, ScannedRow]]]:
        return lambda store: store.scan(view.name, scanned, span, first, horizon_ms)

    def answer(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        span_of: Callable[[bytes | None], ScanSpan],
        order: ScanOrder,
    ) -> list[Any]:
        if not 1 <= first <= MAX_SLICE_ROWS:
            raise BadRequestError(view.name, f"first must be in 1..{MAX_SLICE_ROWS}, got {first}")
        # only the resolver of count views (with `by_count`) takes the COUNT order
        scanned = by_count if order is ScanOrder.COUNT and by_count is not None else table
        context = context_of(info)
        horizon_ms = -1 if horizon is None else horizon(context)
        readers = {}
        for piece in slices:
            after = None if piece.after is None else decode_position(view, piece.after)
            readers[piece.partition] = reader(scanned, span_of(after), first, horizon_ms)
        found = read_each(view, context, readers)
        return [
            slice_type(
                partition=partition,
                edges=[edge_type(position=encode_position(t), node=to_type(r)) for t, r in rows],
            )
            for partition, rows in found.items()
        ]

    def spans(
        backward: bool, prefix: str, since: str | None, until: str | None, order: ScanOrder
    ) -> Callable[[bytes | None], ScanSpan]:
        if order is ScanOrder.COUNT and (prefix or since is not None or until is not None):
            raise BadRequestError(view.name, "prefix, from and to apply to the key order only")
        return lambda after: ScanSpan(prefix, since, until, after, backward)

    def scan(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: Annotated[str | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[str | None, strawberry.argument(name="to")] = strawberry.UNSET,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        span_of = spans(backward, prefix, given(since), given(until), ScanOrder.KEY)
        return answer(info, slices, first, span_of, ScanOrder.KEY)

    def scan_in_order(
        info: strawberry.Info,
        slices: list[SliceInput],
        first: int,
        backward: bool = False,
        prefix: str = "",
        since: Annotated[str | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[str | None, strawberry.argument(name="to")] = strawberry.UNSET,
        order: ScanOrder = ScanOrder.KEY,
    ) -> list[slice_type]:  # type: ignore[valid-type]
        span_of = spans(backward, prefix, given(since), given(until), order)
        return answer(info, slices, first, span_of, order)

    resolver = scan if by_count is None else scan_in_order
    return {view.scan_field: query_field(resolver, view.scan_field)}
