"""The public field of a HISTORY view: a key's events in a time range, page by page.

```graphql
bookingHistory(customer: String!, from: DateTime, to: DateTime, first: Int! = 100,
               after: String, newestFirst: Boolean! = false): BookingEventConnection!
bookingHistoryAsOf(customer: String!, at: DateTime!): BookingEvent  # newest at or before `at`
allBookingHistory(first: Int, after: String, ...): BookingEventConnection!  # every key's
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from datetime import datetime
from typing import Annotated, Any

import strawberry

from gateway.api.fields.common import (
    EVENT_TIME,
    AtLeast,
    FieldSpec,
    MaxLag,
    PageInfo,
    PageType,
    ViewFields,
    authorize_view,
    event_type,
    event_values,
    given,
    make,
    object_type,
    read_options,
    record_key_read,
)
from gateway.api.fields.keys import key_annotation, key_texts
from gateway.api.fields.live import (
    KeySubscription,
    event_values_of,
    key_subscription_fields,
    update_type,
)
from gateway.api.fields.scan import scan_field
from gateway.api.request import RequestContext
from gateway.model import inputs
from gateway.model.inputs import MAX_PAGE_SIZE
from gateway.model.rows import Page
from runtime.valuetypes import annotation
from schema import View

__all__ = ["history_fields"]


def history_fields(view: View) -> ViewFields:
    """The Relay-style connection of a key's events, forwarded to the key's owner."""
    key = view.key_field
    name = view.type_name
    node_type = event_type(
        view, name, f"One event of a {key} (view {view.name}, topic {view.topic})."
    )
    edge_type = object_type(
        view,
        f"{name}Edge",
        f"An event of view {view.name} and its cursor.",
        [("cursor", str, None), ("node", node_type, None)],
    )
    connection_type = object_type(
        view,
        f"{name}Connection",
        f"A page of events of view {view.name}, ordered by event time.",
        [("edges", list[edge_type], None), ("pageInfo", PageInfo, None)],  # type: ignore[valid-type]
    )

    def to_type(page: Page) -> Any:
        edges = [
            make(
                edge_type,
                {"cursor": e.cursor, "node": make(node_type, event_values(view, e.event))},
            )
            for e in page.edges
        ]
        info = PageInfo(
            has_next_page=page.has_next_page,
            end_cursor=page.end_cursor,
            start_cursor=page.edges[0].cursor if page.edges else None,
        )
        return make(connection_type, {"edges": edges, "pageInfo": info})

    def newest(page: Page) -> Any:
        return make(node_type, event_values(view, page.edges[0].event)) if page.edges else None

    key_arg = key_annotation(view)

    async def history(
        info: strawberry.Info,
        entity: Annotated[key_arg, strawberry.argument(name=key)],  # type: ignore[valid-type]
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
        first: int = 100,
        after: str | None = strawberry.UNSET,
        newest_first: bool = False,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> connection_type:  # type: ignore[valid-type]
        context: RequestContext = info.context
        authorize_view(context, view)
        (text,) = key_texts(view, [entity])
        # before atLeast's wait
        context.planner.check_history(view, text, given(since), given(until), first, given(after))
        options = await read_options(context, view, max_lag, at_least)
        read = await context.planner.history(
            view,
            text,
            given(since),
            given(until),
            first,
            given(after),
            context.deadline,
            options,
            newest_first,
        )
        record_key_read(context, info, view, read)
        return to_type(read.value or Page.empty())

    async def as_of(
        info: strawberry.Info,
        entity: Annotated[key_arg, strawberry.argument(name=key)],  # type: ignore[valid-type]
        at: datetime,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> node_type | None:  # type: ignore[valid-type]
        context: RequestContext = info.context
        authorize_view(context, view)
        (text,) = key_texts(view, [entity])
        # the newest event with eventTime <= at: one newest-first event below the end
        until = inputs.as_of_end(view, at)
        context.planner.check_windows(view, text, None, until)  # before atLeast's wait
        options = await read_options(context, view, max_lag, at_least)
        read = await context.planner.history(
            view, text, None, until, 1, None, context.deadline, options, newest_first=True
        )
        record_key_read(context, info, view, read)
        return newest(read.value or Page.empty())

    values: list[FieldSpec] = [(f.name, annotation(f.type) | None, None) for f in view.row_fields]
    values.append((EVENT_TIME, datetime, "When the event happened (UTC)."))
    updates = KeySubscription(
        view,
        update_type(view, values, "an event"),
        lambda row, at: event_values_of(view, row),
        conflate=False,
        snapshot=False,
    )
    subscriptions = key_subscription_fields(view, updates, False, "Each new event")

    def scanned(event: Any) -> Any:
        return make(node_type, event_values(view, event))

    scan = scan_field(view, node_type, scanned, (edge_type, connection_type))
    return ViewFields(
        fields={
            **scan.fields,
            view.point_field: strawberry.field(
                resolver=history,
                name=view.point_field,
                description=f"The events of one {key} of view {view.name} with from <= eventTime "
                f"< to (open ends when omitted), oldest first (newest first with newestFirst), "
                f"`first` (1..{MAX_PAGE_SIZE}) per page; pass pageInfo.endCursor as `after` for "
                "the next page.",
            ),
            view.as_of_field: strawberry.field(
                resolver=as_of,
                name=view.as_of_field,
                description=f"The newest event of one {key} of view {view.name} with eventTime "
                "<= at: its value as of that time; null if it had none yet.",
            ),
        },
        subscriptions=subscriptions,
        page_types=(PageType(view, to_type), PageType(view, newest, as_of=True)),
        scan_type=scan.type,
    )
