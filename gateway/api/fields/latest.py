"""The public fields of a LATEST view: the newest event of a key, and of several keys; the
view's type is a federation entity keyed by the view's key field.

```graphql
type LastBooking @key(fields: "customer") { customer: String!  trip: String  eventTime: DateTime! }
lastBooking(customer: String!): LastBooking
lastBookings(customers: [String!]!): [LastBooking]!
allLastBookings(first: Int, after: String, ...): LastBookingConnection!  # gateway.api.fields.scan
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from datetime import datetime
from typing import Any

from gateway.api.fields.common import (
    EVENT_TIME,
    Entity,
    FieldSpec,
    ViewFields,
    entity_key,
    event_type,
    event_values,
    make,
)
from gateway.api.fields.live import (
    KeySubscription,
    event_values_of,
    key_subscription_fields,
    update_type,
)
from gateway.api.fields.lookup import lookup_fields
from gateway.api.fields.scan import scan_field
from gateway.model.rows import Event, Row
from runtime.valuetypes import annotation
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

    fields = lookup_fields(
        view,
        latest_type,
        to_type,
        f"The newest event of one {key} of view {view.name}; null if unknown.",
        f"The newest events of several {view.keys_arg}, in the order asked; null if unknown.",
    )
    fields.update(scan_field(view, latest_type, to_type))
    values: list[FieldSpec] = [(f.name, annotation(f.type) | None, None) for f in view.value_fields]
    values.append((EVENT_TIME, datetime | None, "When the event happened; null: no event."))
    updates = KeySubscription(
        view,
        update_type(view, values, "the newest event"),
        lambda row, at: event_values_of(view, row),
    )
    subscriptions = key_subscription_fields(view, updates, True, "The newest event")
    return ViewFields(fields, Entity(view, latest_type, to_type), subscriptions)
