"""The totals of count and windowed views, added up from what each partition keeps
(`node.subgraph.fields.totals`): the number of keys and the sum of their counts, of the whole view
or per window.

```graphql
type Totals { keys: Float!  count: Float! }
wordCountTotals(maxLag: Int, atLeast: String): Totals!
type WindowTotals { start: DateTime!  end: DateTime!  keys: Float!  count: Float! }
hostAccessWindowTotals(from: DateTime, to: DateTime, ...): [WindowTotals!]!
```

Floats, exact up to 2^53, since a sum may pass GraphQL Int's 32 bits.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations.
from datetime import datetime
from typing import Annotated, Any

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    MaxLag,
    authorize_view,
    given,
    read_options,
    record_failures,
)
from gateway.api.request import RequestContext
from gateway.reads.protocol import TotalsResult
from schema import View

__all__ = ["Totals", "WindowTotals", "count_totals_field", "window_totals_field"]


@strawberry.type(description="How many keys a view holds and the sum of their counts.")
class Totals:
    keys: float
    count: float


@strawberry.type(description="How many keys one window holds and the sum of their counts.")
class WindowTotals:
    start: datetime
    end: datetime
    keys: float
    count: float


_PARTIAL = (
    " A partition that cannot answer is a PARTITION_UNAVAILABLE error, and the totals lack it."
)


async def _read(
    info: strawberry.Info,
    view: View,
    max_lag: Any,
    at_least: Any,
    since: datetime | None = None,
    until: datetime | None = None,
) -> TotalsResult:
    context: RequestContext = info.context
    authorize_view(context, view)
    options = await read_options(context, view, max_lag, at_least)
    result = await context.planner.totals(view, since, until, context.deadline, options)
    context.add_freshness(view, result.freshness)
    record_failures(context, info, result.failures)
    return result


def count_totals_field(view: View) -> dict[str, Any]:
    async def totals(
        info: strawberry.Info,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> Totals:
        result = await _read(info, view, max_lag, at_least)
        keys = sum(p.keys for p in result.partials)
        return Totals(keys=keys, count=sum(p.count for p in result.partials))

    description = (
        f"How many {view.keys_arg} view {view.name} holds and the sum of their counts, kept "
        "by each partition as it is written (no row is read)." + _PARTIAL
    )
    return {
        view.totals_field: strawberry.field(
            resolver=totals, name=view.totals_field, description=description
        )
    }


def window_totals_field(view: View) -> dict[str, Any]:
    async def totals(
        info: strawberry.Info,
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[WindowTotals]:
        result = await _read(info, view, max_lag, at_least, given(since), given(until))
        merged: dict[tuple[datetime, datetime], tuple[int, int]] = {}
        for p in result.partials:
            assert p.start is not None and p.end is not None
            keys, count = merged.get((p.start, p.end), (0, 0))
            merged[(p.start, p.end)] = (keys + p.keys, count + p.count)
        return [
            WindowTotals(start=start, end=end, keys=keys, count=count)
            for (start, end), (keys, count) in sorted(merged.items())
        ]

    description = (
        f"Per window of view {view.name} with from <= start < to (open ends when omitted), in "
        f"time order: how many {view.keys_arg} it holds and the sum of their counts." + _PARTIAL
    )
    return {
        view.totals_field: strawberry.field(
            resolver=totals, name=view.totals_field, description=description
        )
    }
