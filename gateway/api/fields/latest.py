"""The public fields of a LATEST view: the newest event of a key, and of several keys; the
view's type is a federation entity keyed by the view's key field.

```graphql
type LastBooking @key(fields: "customer") { customer: String!  trip: String  eventTime: DateTime! }
lastBooking(customer: String!): LastBooking
lastBookings(customers: [String!]!): [LastBooking]!
allLastBookings(first: Int, after: String, ...): LastBookingConnection!  # gateway.api.fields.scan
```

An AGGREGATE view's rows are served by the same fields, the results as value fields and
`eventTime` the newest event's time, with a top-N by any numeric result (`fields.ranked`).
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from datetime import datetime
from typing import Any, NamedTuple

from gateway.api.fields.common import (
    EVENT_TIME,
    Entity,
    FieldSpec,
    ViewFields,
    entity_key,
    event_type,
    event_values,
)
from gateway.api.fields.live import (
    KeySubscription,
    event_values_of,
    key_subscription_fields,
    update_type,
)
from gateway.api.fields.lookup import lookup_fields
from gateway.api.fields.ranked import ranked_top_field, ranked_top_subscription, ranking_enum
from gateway.api.fields.scan import scan_field
from gateway.api.fields.totals import aggregate_totals_field
from gateway.model.rows import Event, Row
from runtime.valuetypes import annotation
from schema import View

__all__ = ["latest_fields"]


class _Texts(NamedTuple):
    """What the descriptions call a row: a latest view's newest event, or an aggregate
    view's results."""

    type: str
    one: str
    many: str
    row: str


def _texts(view: View) -> _Texts:
    key, where = view.key_field, f"view {view.name}, topic {view.topic}"
    if view.aggregates:
        return _Texts(
            f"The aggregates of the events of a {key}, and the newest event time ({where}).",
            f"The aggregates of one {key} of view {view.name}; null if it has no event.",
            f"The aggregates of several {view.keys_arg}, in the order asked; null if unknown.",
            "the aggregates",
        )
    return _Texts(
        f"The newest event of a {key} by event time ({where}).",
        f"The newest event of one {key} of view {view.name}; null if unknown.",
        f"The newest events of several {view.keys_arg}, in the order asked; null if unknown.",
        "the newest event",
    )


def latest_fields(view: View) -> ViewFields:
    """Point and multi-key lookup of a LATEST view (or an AGGREGATE view's rows, which
    have a top-N too), and its entity."""
    texts = _texts(view)
    latest_type = event_type(view, view.type_name, texts.type, [entity_key(view)])

    def values_of(event: Row | Event) -> dict[str, Any]:
        assert isinstance(event, Event)
        return event_values(view, event)

    entity = Entity(view, latest_type, values_of)
    to_type = entity.convert

    fields = lookup_fields(view, latest_type, to_type, texts.one, texts.many)
    ranking = ranking_enum(view) if view.ranked_fields else None
    scan = scan_field(view, latest_type, to_type, ranking=ranking)
    fields.update(scan.fields)
    totals_type = None
    if view.ranked_fields:  # an aggregate view's rows, ranked by their numeric results
        fields.update(ranked_top_field(view, latest_type, to_type))
        totals = aggregate_totals_field(view)
        fields.update(totals.fields)
        totals_type = totals.type
    values: list[FieldSpec] = [(f.name, annotation(f.type) | None, None) for f in view.row_fields]
    values.append((EVENT_TIME, datetime | None, "When the event happened; null: no event."))
    updates = KeySubscription(
        view, update_type(view, values, texts.row), lambda row, at: event_values_of(view, row)
    )
    subscriptions = key_subscription_fields(view, updates, True, texts.row.capitalize())
    if view.ranked_fields:
        subscriptions.update(ranked_top_subscription(view, latest_type, to_type))
    return ViewFields(fields, entity, subscriptions, totals_type=totals_type, scan_type=scan.type)
