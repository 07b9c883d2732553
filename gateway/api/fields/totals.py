"""The totals of count, windowed and aggregate views, added up from what each partition
keeps (`node.subgraph.fields.totals`): the number of keys and the sum of their counts, of the
whole view or per window; for an aggregate view, each numeric result's sum (not of
averages), least and greatest value over its keys.

```graphql
type Totals { keys: Float!  count: Float! }
wordCountTotals(maxLag: Int, atLeast: String): Totals!
type WindowTotals { start: DateTime!  end: DateTime!  keys: Float!  count: Float! }
hostAccessWindowTotals(from: DateTime, to: DateTime, ...): [WindowTotals!]!
type ResultTotals { sum: Float  min: Float  max: Float }
type HostPagesTotals { keys: Float!  views: ResultTotals  pages: ResultTotals }
hostPagesTotals(maxLag: Int, atLeast: String): HostPagesTotals!
```

Floats, exact up to 2^53, since a sum may pass GraphQL Int's 32 bits.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations.
import math
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, NamedTuple

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    MaxLag,
    TotalsType,
    authorize_view,
    given,
    make,
    object_type,
    read_options,
    record_failures,
)
from gateway.api.request import RequestContext
from gateway.model import inputs
from gateway.model.rows import ResultTotal
from gateway.reads.protocol import TotalsResult
from schema import AggregateFunction, View

__all__ = [
    "TOTALS_TYPE",
    "ResultTotals",
    "Totals",
    "TotalsField",
    "WindowTotals",
    "aggregate_totals_field",
    "count_totals_field",
    "totals_of",
    "window_totals_field",
    "window_totals_of",
]


TOTALS_TYPE = "Totals"  # the GraphQL name of `Totals`


@strawberry.type(
    name=TOTALS_TYPE, description="How many keys a view holds and the sum of their counts."
)
class Totals:
    keys: float
    count: float


@strawberry.type(description="How many keys one window holds and the sum of their counts.")
class WindowTotals:
    start: datetime
    end: datetime
    keys: float
    count: float


@strawberry.type(
    description="One numeric result of an aggregate view over its keys: the sum (null for an "
    "average, whose sum means nothing), the least and the greatest value; null: no key has one."
)
class ResultTotals:
    sum: float | None
    min: float | None
    max: float | None


class TotalsField(NamedTuple):
    """A view's totals field, and how its value is made of the totals read."""

    fields: dict[str, Any]
    type: TotalsType


def totals_of(result: TotalsResult) -> Totals:
    """The totals of a count view: its partitions' key counts and counts, added up."""
    keys = sum(p.keys for p in result.partials)
    return Totals(keys=keys, count=sum(p.count for p in result.partials))


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
    if view.window is not None:
        inputs.time_range(view, since, until)  # before atLeast's wait
    options = await read_options(context, view, max_lag, at_least)
    result = await context.planner.totals(view, since, until, context.deadline, options)
    context.add_freshness(view, result.freshness)
    record_failures(context, info, result.failures)
    return result


def count_totals_field(view: View) -> TotalsField:
    async def totals(
        info: strawberry.Info,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> Totals:
        return totals_of(await _read(info, view, max_lag, at_least))

    description = (
        f"How many {view.keys_arg} view {view.name} holds and the sum of their counts, kept "
        "by each partition as it is written (no row is read)." + _PARTIAL
    )
    return _totals_field(view, totals, description, totals_of)


def window_totals_of(result: TotalsResult) -> list[WindowTotals]:
    """The totals of a windowed view: per window, its partitions' key counts and counts,
    added up, in time order."""
    merged: dict[tuple[datetime, datetime], tuple[int, int]] = {}
    for p in result.partials:
        assert p.start is not None and p.end is not None
        keys, count = merged.get((p.start, p.end), (0, 0))
        merged[(p.start, p.end)] = (keys + p.keys, count + p.count)
    return [
        WindowTotals(start=start, end=end, keys=keys, count=count)
        for (start, end), (keys, count) in sorted(merged.items())
    ]


def window_totals_field(view: View) -> TotalsField:
    async def totals(
        info: strawberry.Info,
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[WindowTotals]:
        return window_totals_of(
            await _read(info, view, max_lag, at_least, given(since), given(until))
        )

    description = (
        f"Per window of view {view.name} with from <= start < to (open ends when omitted), in "
        f"time order: how many {view.keys_arg} it holds and the sum of their counts." + _PARTIAL
    )
    return _totals_field(view, totals, description, window_totals_of)


def _result_totals(view: View, name: str, partials: list[ResultTotal]) -> ResultTotals | None:
    """One result's totals over the partitions' (None: no key of any has a value of it)."""
    sums = [r.sum for r in partials if r.sum is not None]
    least = [r.min for r in partials if r.min is not None]
    greatest = [r.max for r in partials if r.max is not None]
    if not least:
        return None
    averaged = any(a.name == name and a.function is AggregateFunction.AVG for a in view.aggregates)
    total = None if averaged or not sums else math.fsum(sums)
    return ResultTotals(sum=total, min=min(least), max=max(greatest))


def aggregate_totals_field(view: View) -> TotalsField:
    """The keys of an aggregate view and the totals of each numeric result."""
    results = view.ranked_fields
    totals_type = object_type(
        view,
        f"{view.type_name}Totals",
        f"How many {view.keys_arg} view {view.name} holds, and each numeric result over them.",
        [
            ("keys", float, None),
            *((name, ResultTotals | None, None) for name in results),
        ],
    )

    def aggregate_of(result: TotalsResult) -> Any:
        per_result: dict[str, list[ResultTotal]] = {name: [] for name in results}
        for partial in result.partials:
            for found in partial.results:
                per_result.setdefault(found.name, []).append(found)
        values = {name: _result_totals(view, name, per_result[name]) for name in results}
        return make(totals_type, {"keys": sum(p.keys for p in result.partials), **values})

    async def totals(
        info: strawberry.Info,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> totals_type:  # type: ignore[valid-type]
        return aggregate_of(await _read(info, view, max_lag, at_least))

    description = (
        f"How many {view.keys_arg} view {view.name} holds, and per numeric result its sum, "
        "least and greatest value over them, kept by each partition as it is written (sums "
        "are doubles)." + _PARTIAL
    )
    return _totals_field(view, totals, description, aggregate_of)


def _totals_field(
    view: View, resolver: Any, description: str, convert: Callable[[TotalsResult], Any]
) -> TotalsField:
    field = strawberry.field(resolver=resolver, name=view.totals_field, description=description)
    return TotalsField({view.totals_field: field}, TotalsType(view, convert))
