"""The public fields of a LATEST view: the newest event of a key, and of several keys; the
view's type is a federation entity keyed by the view's key field.

```graphql
type LastBooking @key(fields: "customer") { customer: String!  trip: String  eventTime: DateTime! }
lastBooking(customer: String!): LastBooking
lastBookings(customers: [String!]!): [LastBooking]!
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from typing import Annotated, Any

import strawberry

from gateway.fields.common import (
    AtLeast,
    Entity,
    MaxLag,
    ViewFields,
    entity_key,
    event_type,
    event_values,
    make,
    read_options,
    record_missing,
)
from gateway.request import RequestContext
from gateway.rows import Event, Row
from schema import View

__all__ = ["latest_fields"]


def latest_fields(view: View) -> ViewFields:
    """Point and multi-key lookup of a LATEST view, and its entity."""
    key = view.key_field
    latest_type = event_type(
        view,
        view.type_name,
        f"The newest event of a {key} by event time (view {view.name}, topic {view.topic}).",
        [entity_key(view)],
    )

    def to_type(event: Row | Event | None) -> Any:
        if event is None:
            return None
        assert isinstance(event, Event)
        return make(latest_type, event_values(view, event))

    async def point(
        info: strawberry.Info,
        entity: Annotated[str, strawberry.argument(name=key)],
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> latest_type | None:  # type: ignore[valid-type]
        context: RequestContext = info.context
        context.planner.check_keys(view, [entity])
        options = await read_options(context, view, max_lag, at_least)
        result = await context.loader(view, options).load(entity)
        record_missing(context, info, [result])
        return to_type(result.row)

    async def many(
        info: strawberry.Info,
        keys: Annotated[list[str], strawberry.argument(name=view.keys_arg)],
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[latest_type | None]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        context.planner.check_keys(view, keys)
        options = await read_options(context, view, max_lag, at_least)
        results = await context.loader(view, options).load_many(keys)
        record_missing(context, info, results)
        return [to_type(r.row) for r in results]

    fields = {
        view.point_field: strawberry.field(
            resolver=point,
            name=view.point_field,
            description=f"The newest event of one {key} of view {view.name}; null if unknown.",
        ),
        view.many_field: strawberry.field(
            resolver=many,
            name=view.many_field,
            description=f"The newest events of several {view.keys_arg}, in the order asked; "
            "null if unknown.",
        ),
    }
    return ViewFields(fields, Entity(view, latest_type, to_type))
