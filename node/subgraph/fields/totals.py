"""The totals fields of count, windowed and aggregate views (e.g. wordCountTotals): per
partition asked, the number of keys and the sum of their counts (per window for windowed
views; for aggregate views, each numeric result's sum, least and greatest value), kept by
the store with every write (`PartitionStore.total`); the gateway adds them up.

```graphql
type PartitionTotal { partition: Int!  keys: Float!  count: Float! }
wordCountTotals(partitions: [Int!]!): [PartitionTotal!]!
type PartitionWindowTotal { partition: Int!  start: DateTime!  end: DateTime!  keys: Float!
                            count: Float! }
hostAccessWindowTotals(partitions: [Int!]!, from: DateTime, to: DateTime):
    [PartitionWindowTotal!]!
type ResultTotal { name: String!  sum: Float  min: Float  max: Float }
type PartitionAggregateTotal { partition: Int!  keys: Float!  results: [ResultTotal!]! }
hostPagesTotals(partitions: [Int!]!): [PartitionAggregateTotal!]!
```

Sums are Floats (exact up to 2^53): they may pass GraphQL Int's 32 bits.
"""

# No `from __future__ import annotations`: strawberry must see the types, not strings.

from collections.abc import Callable
from datetime import datetime
from operator import methodcaller
from typing import Annotated

import strawberry
from strawberry.types.field import StrawberryField

from node.subgraph.fields.common import given, query_field, read_each
from node.subgraph.fields.context import ReadContext, context_of
from node.times import from_ms, time_range
from schema import View

__all__ = [
    "PartitionAggregateTotal",
    "PartitionTotal",
    "PartitionWindowTotal",
    "ResultTotal",
    "aggregate_totals_field",
    "count_totals_field",
    "window_totals_field",
]


@strawberry.type(description="What one partition holds of a view: keys and their counts' sum.")
class PartitionTotal:
    partition: int
    keys: float
    count: float


@strawberry.type(description="What one partition holds of one window of a view.")
class PartitionWindowTotal:
    partition: int
    start: datetime
    end: datetime
    keys: float
    count: float


@strawberry.type(description="One numeric result over one partition's keys (null: no value).")
class ResultTotal:
    name: str
    sum: float | None
    min: float | None
    max: float | None


@strawberry.type(description="What one partition holds of an aggregate view.")
class PartitionAggregateTotal:
    partition: int
    keys: float
    results: list[ResultTotal]


def aggregate_totals_field(view: View) -> dict[str, StrawberryField]:
    fields = view.ranked_fields

    def totals(info: strawberry.Info, partitions: list[int]) -> list[PartitionAggregateTotal]:
        readers = {p: methodcaller("aggregate_total", view.name, fields) for p in partitions}
        found = read_each(view, context_of(info), readers)
        return [
            PartitionAggregateTotal(
                partition=p,
                keys=keys,
                results=[ResultTotal(name=r.name, sum=r.sum, min=r.min, max=r.max) for r in rs],
            )
            for p, (keys, rs) in found.items()
        ]

    return {view.totals_field: query_field(totals, view.totals_field)}


def count_totals_field(view: View) -> dict[str, StrawberryField]:
    def totals(info: strawberry.Info, partitions: list[int]) -> list[PartitionTotal]:
        readers = {p: methodcaller("total", view.name) for p in partitions}
        found = read_each(view, context_of(info), readers)
        return [PartitionTotal(partition=p, keys=t.keys, count=t.count) for p, t in found.items()]

    return {view.totals_field: query_field(totals, view.totals_field)}


def window_totals_field(
    view: View, horizon: Callable[[ReadContext], int]
) -> dict[str, StrawberryField]:
    def totals(
        info: strawberry.Info,
        partitions: list[int],
        since: Annotated[datetime | None, strawberry.argument(name="from")] = strawberry.UNSET,
        until: Annotated[datetime | None, strawberry.argument(name="to")] = strawberry.UNSET,
    ) -> list[PartitionWindowTotal]:
        context = context_of(info)
        since_ms, until_ms = time_range(view, given(since), given(until))
        reader = methodcaller("window_totals", view.name, since_ms, until_ms, horizon(context))
        found = read_each(view, context, dict.fromkeys(partitions, reader))
        return [
            PartitionWindowTotal(
                partition=p,
                start=from_ms(start),
                end=from_ms(end),
                keys=total.keys,
                count=total.count,
            )
            for p, windows in found.items()
            for start, end, total in windows
        ]

    return {view.totals_field: query_field(totals, view.totals_field)}
