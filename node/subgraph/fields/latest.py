"""The fields of a LATEST view (e.g. last_booking): the newest event of a key; its type
is a federation entity. An AGGREGATE view's rows are served by the same fields, with the
results as value fields, and a top-N by each numeric result (`fields.ranked`).

```graphql
type LastBooking @key(fields: "customer") { customer: String!  trip: String  eventTime: DateTime! }
lastBooking(customer: String!): LastBooking
lastBookings(customers: [String!]!): [LastBooking]!
allLastBookings(slices: [SliceInput!]!, first: Int!, ...): [LastBookingSlice!]!  # fields.scan
```
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

from operator import methodcaller
from typing import Annotated, Any

import strawberry

from node.storage.layout import Table
from node.subgraph.fields.common import query_field, read_key, read_keys
from node.subgraph.fields.context import ReadContext, context_of
from node.subgraph.fields.entities import Entity, ViewFields, entity_key
from node.subgraph.fields.events import event_type
from node.subgraph.fields.ranked import ranked_top_field
from node.subgraph.fields.scan import ScanOrder, event_columns, scan_field
from node.subgraph.fields.totals import aggregate_totals_field
from schema import View

__all__ = ["latest_fields"]


def latest_fields(view: View) -> ViewFields:
    """Point and multi-key lookup of the latest event per key, and its entity."""
    row_type, to_type = event_type(view, [entity_key(view)])

    def read_many(context: ReadContext, keys: list[str]) -> list[Any]:
        rows = read_keys(
            view, context, keys, lambda wanted: methodcaller("latest_many", view.name, wanted)
        )
        return [None if row is None else to_type(row) for row in rows]

    def point(
        info: strawberry.Info, key: Annotated[str, strawberry.argument(name=view.key_field)]
    ) -> row_type | None:  # type: ignore[valid-type]
        row = read_key(view, context_of(info), key, methodcaller("latest", view.name, key))
        return None if row is None else to_type(row)

    def many(
        info: strawberry.Info, keys: Annotated[list[str], strawberry.argument(name=view.keys_arg)]
    ) -> list[row_type | None]:  # type: ignore[valid-type]
        return read_many(context_of(info), keys)

    fields = {
        view.point_field: query_field(point, view.point_field),
        view.many_field: query_field(many, view.many_field),
        **scan_field(
            view,
            Table.LATEST,
            event_columns(view),
            orders={ScanOrder.RESULT: Table.RANK} if view.ranked_fields else None,
        ),
    }
    if view.ranked_fields:  # an aggregate view's rows, ranked by their numeric results
        fields.update(ranked_top_field(view, row_type, to_type))
        fields.update(aggregate_totals_field(view))
    return ViewFields(fields, Entity(view, read_many))
