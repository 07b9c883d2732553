"""The public fields of a WINDOWED_COUNT view: a key's windows in a time range, and the
top-N of one window over every partition. A WINDOWED_AGGREGATE view's windows also show
the view's results (`basket: Float`), in the same fields.

```graphql
hostAccessWindows(host: String!, from: DateTime, to: DateTime): [HostAccessWindow!]!
topHostsPerMinute(limit: Int! = 10, window: WindowInput!): [HostAccessWindow!]!
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, NamedTuple

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    MaxLag,
    RowType,
    ViewFields,
    WindowInput,
    authorize_view,
    duration_text,
    given,
    make,
    object_type,
    read_options,
    record_failures,
    record_key_read,
)
from gateway.api.fields.keys import key_annotation, key_fields, key_texts, key_values
from gateway.api.fields.live import (
    KeySubscription,
    key_subscription_fields,
    top_subscription_field,
    update_type,
)
from gateway.api.fields.ranked import ranking_enum
from gateway.api.fields.scan import scan_field
from gateway.api.fields.totals import window_totals_field
from gateway.api.request import RequestContext
from gateway.model.rows import Ranked, WindowCount, changelog_values
from gateway.model.timestamps import from_ms
from runtime.valuetypes import annotation
from schema import View, WindowSpec

__all__ = ["windowed_fields"]


class _Texts(NamedTuple):
    """How the descriptions call one window of a spec, its end, and the starts a window
    argument takes."""

    window: str
    end: str
    starts: str


def _texts(spec: WindowSpec) -> _Texts:
    if spec.gap_ms is not None:
        gap = duration_text(spec.gap_ms)
        return _Texts(
            f"one session (events at most {gap} apart; written once it is closed)",
            f"First instant after the session: its last event + {gap}.",
            "the start of a session (the sessions starting at that instant)",
        )
    size = duration_text(spec.size_ms)
    if spec.hopping:
        size = f"{size} (a new one every {duration_text(spec.hop_ms)})"
    return _Texts(
        f"one window of {size}",
        "First instant after the window: start + window size.",
        f"a multiple of {duration_text(spec.hop_ms)} since 1970",
    )


def windowed_fields(view: View) -> ViewFields:
    """Window range per key and per-window top-N of a WINDOWED_COUNT or
    WINDOWED_AGGREGATE view."""
    assert view.window is not None
    texts = _texts(view.window)
    retention = duration_text(view.window.retention_ms)
    key = view.key_field
    what = "Events" if not view.aggregates else "Events and their aggregates"
    results = [(f.name, annotation(f.type) | None, None) for f in view.row_fields]
    window_type = object_type(
        view,
        view.type_name,
        f"{what} per {key} in {texts.window} (view {view.name}, topic "
        f"{view.topic}); windows are kept for {retention}.",
        [
            *key_fields(view),
            ("start", datetime, "First instant of the window (UTC)."),
            ("end", datetime, texts.end),
            ("count", int, "The window's events." if view.aggregates else None),
            *results,
        ],
    )

    def to_type(row: WindowCount | Ranked) -> Any:
        assert isinstance(row, WindowCount)
        values = {
            **key_values(view, row.key),
            "start": row.start,
            "end": row.end,
            "count": row.count,
            **{f.name: row.values.get(f.name) for f in view.row_fields},
        }
        return make(window_type, values)

    key_arg = key_annotation(view)

    async def windows(
        info: strawberry.Info,
        entity: Annotated[key_arg, strawberry.argument(name=key)],  # type: ignore[valid-type]
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[window_type]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        authorize_view(context, view)
        (text,) = key_texts(view, [entity])
        context.planner.check_windows(view, text, given(since), given(until))  # before the wait
        options = await read_options(context, view, max_lag, at_least)
        read = await context.planner.windows(
            view, text, given(since), given(until), context.deadline, options
        )
        record_key_read(context, info, view, read)
        return [to_type(row) for row in read.value or []]

    async def read_top(
        info: strawberry.Info,
        limit: int,
        window: WindowInput,
        max_lag: Any,
        at_least: Any,
        by: str | None = None,
    ) -> list[Any]:
        context: RequestContext = info.context
        authorize_view(context, view)
        context.planner.check_top(view, limit, window.start)  # before atLeast's wait
        options = await read_options(context, view, max_lag, at_least)
        result = await context.planner.top(
            view, limit, context.deadline, window.start, options, by=by
        )
        context.add_freshness(view, result.freshness)
        record_failures(context, info, result.failures)
        return [to_type(row) for row in result.rows]

    async def top(
        info: strawberry.Info,
        *,
        limit: int = 10,
        window: WindowInput,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[window_type]:  # type: ignore[valid-type]
        return await read_top(info, limit, window, max_lag, at_least)

    top_resolver: Any = top
    ranking = ranking_enum(view) if view.ranked_fields else None
    if ranking is not None:  # the annotation of `by` needs the enum

        async def ranked_top(
            info: strawberry.Info,
            *,
            limit: int = 10,
            window: WindowInput,
            by: ranking | None = None,  # type: ignore[valid-type]
            max_lag: MaxLag = strawberry.UNSET,
            at_least: AtLeast = strawberry.UNSET,
        ) -> list[window_type]:  # type: ignore[valid-type]
            field = None if by is None else by.value  # type: ignore[attr-defined]
            return await read_top(info, limit, window, max_lag, at_least, field)

        top_resolver = ranked_top

    size_ms = view.window.size_ms

    def window_values(row: Mapping[str, Any] | None, at: tuple[int, ...]) -> dict[str, Any]:
        if row is None:  # removed (retention): a session's end is no longer known
            gone = {f.name: None for f in view.row_fields}
            return {"start": from_ms(at[0]), "end": from_ms(at[0] + size_ms), "count": None, **gone}
        start, end = row["start_ms"], row["end_ms"]
        shown = changelog_values(view, row)
        return {"start": from_ms(start), "end": from_ms(end), "count": row.get("count"), **shown}

    updates = KeySubscription(
        view,
        update_type(
            view,
            [
                ("start", datetime, "First instant of the window (UTC)."),
                ("end", datetime, texts.end),
                ("count", int | None, "Null: the window is no longer kept (retention)."),
                *results,
            ],
            "a window",
        ),
        window_values,
        empty_snapshots=False,
    )
    subscriptions = key_subscription_fields(view, updates, False, "Each window")
    subscriptions[view.top_field] = top_subscription_field(view, window_type, to_type, ranking)
    totals = window_totals_field(view)
    scan = scan_field(view, window_type, to_type)
    return ViewFields(
        {
            view.point_field: strawberry.field(
                resolver=windows,
                name=view.point_field,
                description=f"The windows ({texts.window}) of one {key} of view {view.name} "
                "with from <= start < to (open ends when omitted), in time order.",
            ),
            view.top_field: strawberry.field(
                resolver=top_resolver,
                name=view.top_field,
                description=f"The `limit` {view.keys_arg} most counted in {texts.window} "
                f"(count desc, then {key} asc) of view {view.name}; the window's start must be "
                f"{texts.starts}."
                + (
                    f" With `by`, the {view.keys_arg} with the greatest value of that result "
                    f"instead (then {key} asc; a {key} without it is left out)."
                    if ranking is not None
                    else ""
                ),
            ),
            **scan.fields,
            **totals.fields,
        },
        subscriptions=subscriptions,
        row_type=RowType(view, window_type, to_type),
        totals_type=totals.type,
        scan_type=scan.type,
    )
