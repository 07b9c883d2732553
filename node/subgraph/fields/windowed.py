"""The fields of a WINDOWED_COUNT view (e.g. host_access_per_minute), and of a
WINDOWED_AGGREGATE view, whose windows also show the view's results (`basket: Float`).

```graphql
type HostAccessWindow { host: String!  start: DateTime!  end: DateTime!  count: Int! }
hostAccessWindows(host: String!, from: DateTime, to: DateTime): [HostAccessWindow!]!
topHostsPerMinute(limit: Int!, window: WindowInput!, partitions: [Int!]): [HostAccessWindow!]!
# and, of a windowed aggregate view, `by: String`: one of its numeric results to rank by
allHostAccessWindows(slices: [SliceInput!]!, first: Int!, ...): [HostAccessWindowSlice!]!
```

Windows past the view's retention (by the request's clock) are never returned.
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

from datetime import datetime
from operator import methodcaller
from typing import Annotated, Any

import strawberry

from node.storage.layout import Table
from node.storage.retention import expiry_horizon
from node.subgraph.fields.common import (
    WindowInput,
    check_limit,
    given,
    query_field,
    read_key,
    read_partitions,
)
from node.subgraph.fields.context import ReadContext, context_of
from node.subgraph.fields.entities import ViewFields
from node.subgraph.fields.events import add_value_attributes, value_arguments
from node.subgraph.fields.ranked import by_result, check_ranked
from node.subgraph.fields.scan import ScanOrder, scan_field, window_columns
from node.subgraph.fields.totals import window_totals_field
from node.times import from_ms, time_range, window_start_ms
from runtime.ranking import is_rankable, merge_top
from schema import View, WindowRow

__all__ = ["windowed_fields"]


def _window_type(view: View) -> type:
    annotations: dict[str, Any] = {"key": str, "start": datetime, "end": datetime, "count": int}
    namespace: dict[str, Any] = {"key": strawberry.field(name=view.key_field)}
    add_value_attributes(view, annotations, namespace)  # a windowed aggregate's results
    namespace["__annotations__"] = annotations
    return strawberry.type(type(view.type_name, (), namespace), name=view.type_name)


def windowed_fields(view: View) -> ViewFields:
    """A key's windows in a time range, and the node-local top-N of one window."""
    window_type = _window_type(view)
    results = bool(view.row_fields)

    def to_type(row: WindowRow) -> Any:
        values = value_arguments(view, row.fields)
        return window_type(
            key=row.key,
            start=from_ms(row.start_ms),
            end=from_ms(row.end_ms),
            count=row.count,
            **values,
        )

    def horizon(context: ReadContext) -> int:
        return expiry_horizon(view, context.now_ms)

    def windows(
        info: strawberry.Info,
        key: Annotated[str, strawberry.argument(name=view.key_field)],
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
    ) -> list[window_type]:  # type: ignore[valid-type]
        context = context_of(info)
        since_ms, until_ms = time_range(view, given(since), given(until))
        reader = methodcaller("windows", view.name, key, since_ms, until_ms, horizon(context))
        return [to_type(row) for row in read_key(view, context, key, reader)]

    def top(
        info: strawberry.Info,
        limit: int,
        window: WindowInput,
        partitions: list[int] | None = strawberry.UNSET,
    ) -> list[window_type]:  # type: ignore[valid-type]
        return read_top(info, limit, window, given(partitions), None)

    def top_by(
        info: strawberry.Info,
        limit: int,
        window: WindowInput,
        partitions: list[int] | None = strawberry.UNSET,
        by: str | None = strawberry.UNSET,
    ) -> list[window_type]:  # type: ignore[valid-type]
        ranked_by = given(by)
        if ranked_by is not None:
            check_ranked(view, ranked_by)
        return read_top(info, limit, window, given(partitions), ranked_by)

    def read_top(
        info: strawberry.Info,
        limit: int,
        window: WindowInput,
        partitions: list[int] | None,
        ranked_by: str | None,
    ) -> list[Any]:
        context = context_of(info)
        check_limit(view, limit)
        start_ms = window_start_ms(view, window.start)
        reader = methodcaller(
            "top_window", view.name, start_ms, limit, horizon(context), results, ranked_by
        )
        tops = read_partitions(view, context, partitions, reader)
        if ranked_by is None:
            return [to_type(row) for row in merge_top(tops, limit)]
        # an entry of a result its row no longer has (one dropped from the view) ranks nothing
        shown = [[r for r in top if is_rankable(r.fields.get(ranked_by))] for top in tops]
        return [to_type(row) for row in merge_top(shown, limit, by_result(ranked_by))]

    return ViewFields(
        {
            view.point_field: query_field(windows, view.point_field),
            view.top_field: query_field(top_by if view.ranked_fields else top, view.top_field),
            **scan_field(
                view,
                Table.WINDOW,
                window_columns(view),
                horizon,
                {ScanOrder.START: Table.WINDOW_START, ScanOrder.COUNT: Table.WINDOW_TOP},
            ),
            **window_totals_field(view, horizon),
        }
    )
