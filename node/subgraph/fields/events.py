"""The GraphQL type of one event of a LATEST or HISTORY view, e.g.
`type LastBooking { customer: String!  trip: String  eventTime: DateTime! }`.

Value fields are nullable: a field missing from the event, or whose value does not fit
its type, is null (schema.fieldtypes).
"""

# No `from __future__ import annotations`: strawberry must see the types, not strings.

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import strawberry

from node.errors import NodeError
from node.times import from_ms
from runtime.valuetypes import annotation
from schema import EventRow, View, field_value

__all__ = ["EVENT_TIME_FIELD", "add_value_attributes", "event_type", "value_arguments"]

EVENT_TIME_FIELD = "eventTime"


def event_type(
    view: View, directives: Sequence[object] = ()
) -> tuple[type, Callable[[EventRow], Any]]:
    """The event type of `view` (with `directives`) and the function that turns an EventRow
    into it."""
    names = [view.key_field, *(f.name for f in view.row_fields), EVENT_TIME_FIELD]
    if len(set(names)) != len(names):
        raise NodeError(f"view {view.name}: its event type would repeat a field: {names}")
    annotations: dict[str, Any] = {"key": str}
    namespace: dict[str, Any] = {"key": strawberry.field(name=view.key_field)}
    add_value_attributes(view, annotations, namespace)
    annotations["event_time"] = datetime
    namespace["event_time"] = strawberry.field(name=EVENT_TIME_FIELD)
    namespace["__annotations__"] = annotations
    row_type = strawberry.type(
        type(view.type_name, (), namespace), name=view.type_name, directives=directives
    )

    def to_type(row: EventRow) -> Any:
        values = value_arguments(view, row.fields)
        return row_type(key=row.key, event_time=from_ms(row.event_ms), **values)

    return row_type, to_type


def add_value_attributes(
    view: View, annotations: dict[str, Any], namespace: dict[str, Any]
) -> None:
    """Add the view's row fields (`View.row_fields`) to a type being built: Python
    attributes v0, v1, ... stand for them, whatever their names, each nullable."""
    for index, value_field in enumerate(view.row_fields):
        annotations[f"v{index}"] = annotation(value_field.type) | None
        namespace[f"v{index}"] = strawberry.field(name=value_field.name)


def value_arguments(view: View, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The v0, v1, ... of `add_value_attributes` for a row's `fields`, as their types show
    them."""
    return {
        f"v{index}": field_value(value_field.type, fields.get(value_field.name))
        for index, value_field in enumerate(view.row_fields)
    }
