"""The field of a HISTORY view (e.g. booking_history): a key's events, page by page.

```graphql
type BookingEvent { customer: String!  trip: String  eventTime: DateTime! }
type BookingEventEdge { cursor: String!  node: BookingEvent! }
type BookingEventConnection { edges: [BookingEventEdge!]!  pageInfo: PageInfo! }
bookingHistory(customer: String!, from: DateTime, to: DateTime, first: Int! = 100,
               after: String, newestFirst: Boolean! = false): BookingEventConnection!
allBookingHistory(slices: [SliceInput!]!, first: Int!, ...): [BookingEventSlice!]!
```

Events come in (event_ms, source partition, source offset) order, or the reverse with
`newestFirst`. A cursor is the unpadded base64url of `pack(event_ms, partition, offset)`:
opaque to clients, and the exclusive start of the next page in the page's order.
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

import base64
import binascii
import struct
from datetime import datetime
from operator import methodcaller
from typing import Annotated, Any

import strawberry

from node.errors import BadRequestError
from node.storage.changes import EventPosition, position
from node.storage.layout import Table
from node.subgraph.fields.common import PageInfo, given, query_field, read_key
from node.subgraph.fields.context import context_of
from node.subgraph.fields.entities import ViewFields
from node.subgraph.fields.events import event_type
from node.subgraph.fields.scan import event_columns, scan_field
from node.times import time_range
from schema import EventRow, View, pack, unpack

__all__ = ["MAX_PAGE_SIZE", "decode_cursor", "encode_cursor", "history_fields"]

MAX_PAGE_SIZE = 1000
_MAX_CURSOR_CHARS = 512


def encode_cursor(row: EventRow) -> str:
    return base64.urlsafe_b64encode(pack(*position(row))).rstrip(b"=").decode("ascii")


def decode_cursor(view: View, cursor: str) -> EventPosition:
    """The position a cursor names; BAD_USER_INPUT for anything no page produced."""
    try:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise ValueError("too long")
        bare = cursor.rstrip("=")
        packed = base64.b64decode(bare + "=" * (-len(bare) % 4), altchars=b"-_", validate=True)
        event_ms, partition, offset = unpack(packed)
        if not all(isinstance(part, int) for part in (event_ms, partition, offset)):
            raise ValueError("not three integers")
    except (binascii.Error, ValueError, IndexError, struct.error) as exc:  # struct: cut short
        shown = cursor if len(cursor) <= 40 else cursor[:40] + "..."
        raise BadRequestError(
            view.name, f"after {shown!r} is no cursor of this view (use pageInfo.endCursor)"
        ) from exc
    return (int(event_ms), int(partition), int(offset))


def _connection_types(view: View, node_type: type) -> tuple[type, type]:
    name = view.type_name
    edge = type(f"{name}Edge", (), {"__annotations__": {"cursor": str, "node": node_type}})
    edge_type = strawberry.type(edge, name=f"{name}Edge")
    connection = type(
        f"{name}Connection",
        (),
        {"__annotations__": {"edges": list[edge_type], "page_info": PageInfo}},  # type: ignore[valid-type]
    )
    return edge_type, strawberry.type(connection, name=f"{name}Connection")


def history_fields(view: View) -> ViewFields:
    """A key's events in a time range as a Relay-style connection."""
    node_type, to_node = event_type(view)
    edge_type, connection_type = _connection_types(view, node_type)

    def page(rows: list[EventRow], first: int) -> Any:
        edges = [edge_type(cursor=encode_cursor(r), node=to_node(r)) for r in rows[:first]]
        info = PageInfo(
            has_next_page=len(rows) > first, end_cursor=edges[-1].cursor if edges else None
        )
        return connection_type(edges=edges, page_info=info)

    def history(
        info: strawberry.Info,
        key: Annotated[str, strawberry.argument(name=view.key_field)],
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
        first: int = 100,
        after: str | None = strawberry.UNSET,
        newest_first: bool = False,
    ) -> connection_type:  # type: ignore[valid-type]
        if not 1 <= first <= MAX_PAGE_SIZE:
            raise BadRequestError(view.name, f"first must be in 1..{MAX_PAGE_SIZE}, got {first}")
        since_ms, until_ms = time_range(view, given(since), given(until))
        cursor = given(after)
        start = None if cursor is None else decode_cursor(view, cursor)
        # one more than asked: whether it exists is hasNextPage
        reader = methodcaller(
            "history", view.name, key, since_ms, until_ms, start, first + 1, newest_first
        )
        return page(read_key(view, context_of(info), key, reader), first)

    return ViewFields(
        {
            view.point_field: query_field(history, view.point_field),
            **scan_field(view, Table.EVENT, event_columns(view)),
        }
    )
