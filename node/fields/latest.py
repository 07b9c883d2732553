"""The fields of a LATEST view (e.g. last_booking): the newest event of a key.

```graphql
type LastBooking { customer: String!  trip: String  eventTime: DateTime! }
lastBooking(customer: String!): LastBooking
lastBookings(customers: [String!]!): [LastBooking]!
```
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

from operator import methodcaller
from typing import Annotated

import strawberry
from strawberry.types.field import StrawberryField

from node.fields.common import query_field, read_key, read_keys
from node.fields.context import context_of
from node.fields.events import event_type
from schema import View

__all__ = ["latest_fields"]


def latest_fields(view: View) -> dict[str, StrawberryField]:
    """Point and multi-key lookup of the latest event per key."""
    row_type, to_type = event_type(view)

    def point(
        info: strawberry.Info, key: Annotated[str, strawberry.argument(name=view.key_field)]
    ) -> row_type | None:  # type: ignore[valid-type]
        row = read_key(view, context_of(info), key, methodcaller("latest", view.name, key))
        return None if row is None else to_type(row)

    def many(
        info: strawberry.Info, keys: Annotated[list[str], strawberry.argument(name=view.keys_arg)]
    ) -> list[row_type | None]:  # type: ignore[valid-type]
        rows = read_keys(
            view,
            context_of(info),
            keys,
            lambda wanted: methodcaller("latest_many", view.name, wanted),
        )
        return [None if row is None else to_type(row) for row in rows]

    return {
        view.point_field: query_field(point, view.point_field),
        view.many_field: query_field(many, view.many_field),
    }
