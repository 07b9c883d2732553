"""The fields of a COUNT view (e.g. word_counts); its type is a federation entity.

```graphql
type WordCount @key(fields: "word") { word: String!  count: Int! }
wordCount(word: String!): WordCount
wordCounts(words: [String!]!): [WordCount]!
topWords(limit: Int!, partitions: [Int!]): [WordCount!]!
allWordCounts(slices: [SliceInput!]!, first: Int!, ...): [WordCountSlice!]!  # fields.scan
```
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

from operator import methodcaller
from typing import Annotated

import strawberry

from node.storage.layout import Table
from node.subgraph.fields.common import (
    check_limit,
    given,
    query_field,
    read_key,
    read_keys,
    read_partitions,
)
from node.subgraph.fields.context import ReadContext, context_of
from node.subgraph.fields.entities import Entity, ViewFields, entity_key
from node.subgraph.fields.scan import ScanOrder, count_columns, scan_field
from node.subgraph.fields.totals import count_totals_field
from runtime.ranking import merge_top
from schema import CountRow, View

__all__ = ["count_fields"]


def _count_type(view: View) -> type:
    """`type WordCount { word: String!  count: Int! }`, resolved straight from CountRow."""
    namespace = {
        "__annotations__": {"key": str, "count": int},
        "key": strawberry.field(name=view.key_field),
    }
    return strawberry.type(
        type(view.type_name, (), namespace), name=view.type_name, directives=[entity_key(view)]
    )


def count_fields(view: View) -> ViewFields:
    """Point lookup, multi-key lookup and node-local top-N of a COUNT view, and its entity."""
    row_type = _count_type(view)

    def read_many(context: ReadContext, keys: list[str]) -> list[CountRow | None]:
        return read_keys(
            view, context, keys, lambda wanted: methodcaller("get_many", view.name, wanted)
        )

    def point(
        info: strawberry.Info, key: Annotated[str, strawberry.argument(name=view.key_field)]
    ) -> row_type | None:  # type: ignore[valid-type]
        return read_key(view, context_of(info), key, methodcaller("get", view.name, key))

    def many(
        info: strawberry.Info, keys: Annotated[list[str], strawberry.argument(name=view.keys_arg)]
    ) -> list[row_type | None]:  # type: ignore[valid-type]
        return read_many(context_of(info), keys)

    def entities(context: ReadContext, keys: list[str]) -> list[object | None]:
        # `_Entity` is a union: its members must be instances of the type, not CountRows
        rows = read_many(context, keys)
        return [None if r is None else row_type(key=r.key, count=r.count) for r in rows]

    def top(
        info: strawberry.Info, limit: int, partitions: list[int] | None = strawberry.UNSET
    ) -> list[row_type]:  # type: ignore[valid-type]
        # UNSET (not None) as the default keeps the SDL at `partitions: [Int!]`
        check_limit(view, limit)
        reader = methodcaller("top", view.name, limit)
        tops = read_partitions(view, context_of(info), given(partitions), reader)
        return merge_top(tops, limit)

    fields = {
        view.point_field: query_field(point, view.point_field),
        view.many_field: query_field(many, view.many_field),
        view.top_field: query_field(top, view.top_field),
        **scan_field(view, Table.COUNT, count_columns, orders={ScanOrder.COUNT: Table.TOP}),
        **count_totals_field(view),
    }
    # a CountRow has the type's fields (key, count) as attributes
    return ViewFields(fields, Entity(view, entities, rows=read_many))
