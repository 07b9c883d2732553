"""The node's GraphQL subgraph, generated from the view catalogue.

Each view kind has one builder that turns a catalogue entry into GraphQL fields, so a
new view of an existing kind needs no resolver code. The fields read only partitions
this node holds: anything else is a `NotOwnerError`, and every partition read is
recorded in the request's `ReadContext` for `extensions.freshness`.

For a COUNT view like word_counts:

```graphql
type WordCount { word: String!  count: Int! }
type Query {
  wordCount(word: String!): WordCount
  wordCounts(words: [String!]!): [WordCount]!
  topWords(limit: Int!, partitions: [Int!]): [WordCount!]!
}
```
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Annotated, Any, Optional, TypeVar

import strawberry
from graphql import GraphQLError
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.types import ExecutionContext
from strawberry.types.field import StrawberryField
from strawberry.utils.logging import StrawberryLogger

from node.errors import BadRequestError, NodeError, NotOwnerError, QueryError
from node.partitions import PartitionRegistry
from node.store import PartitionStore
from schema import CATALOGUE, CountRow, PartitionStatus, Role, View, ViewKind, partition_for

__all__ = ["MAX_KEYS", "MAX_TOP_LIMIT", "ReadContext", "build_subgraph"]

MAX_TOP_LIMIT = 10_000
MAX_KEYS = 10_000
# distinct query texts kept parsed and validated; the gateway sends a handful of
# documents with variables, GraphiQL users a few more
_DOCUMENT_CACHE_SIZE = 1024

T = TypeVar("T")


@dataclass
class ReadContext:
    """One request's view of the node: where to read and what was read (for freshness)."""

    registry: PartitionRegistry
    freshness: dict[int, PartitionStatus] = field(default_factory=dict)
    executed: bool = False

    @property
    def node_id(self) -> str:
        return self.registry.node_id

    def read(
        self, view: View, partition: int, reader: Callable[[PartitionStore], T], key: str | None
    ) -> T:
        """`reader(store)` on `partition`, or `NotOwnerError` naming `key` when not held."""
        result = self.try_read(partition, reader)
        if result is None:
            raise NotOwnerError(view.name, partition, self.node_id, key=key)
        return result[0]

    def try_read(self, partition: int, reader: Callable[[PartitionStore], T]) -> tuple[T] | None:
        """`(reader(store),)` on `partition`, or None when this node does not hold it."""
        result = self.registry.read(partition, reader)
        if result is None:
            return None
        value, status = result
        self.freshness.setdefault(partition, status)
        return (value,)

    def freshness_entries(self) -> list[dict[str, Any]]:
        return [
            {
                "partition": partition,
                "node": self.node_id,
                "role": status.role.value,
                "appliedOffset": status.applied_offset,
                "lag": status.lag,
            }
            for partition, status in sorted(self.freshness.items())
        ]


def _context(info: strawberry.Info) -> ReadContext:
    context = info.context
    assert isinstance(context, ReadContext), "execute the subgraph with a ReadContext"
    return context


def _check_key(view: View, key: str) -> None:
    if not key:
        raise BadRequestError(view.name, f"{view.key_field} must not be empty")


def _partition_count(view: View, context: ReadContext) -> int:
    return context.registry.partition_count(view.changelog_topic)


def _count_type(view: View) -> type:
    """`type WordCount { word: String!  count: Int! }`, resolved straight from CountRow."""
    namespace = {
        "__annotations__": {"key": str, "count": int},
        "key": strawberry.field(name=view.key_field),
    }
    return strawberry.type(type(view.type_name, (), namespace), name=view.type_name)


def _count_point(view: View, row_type: type) -> StrawberryField:
    def resolve(info: strawberry.Info, key: str) -> Any:
        context = _context(info)
        _check_key(view, key)
        partition = partition_for(key, _partition_count(view, context))
        return context.read(view, partition, methodcaller("get", view.name, key), key)

    resolve.__annotations__ = {
        "info": strawberry.Info,
        "key": Annotated[str, strawberry.argument(name=view.key_field)],
        "return": Optional[row_type],  # noqa: UP045 (row_type is a runtime value)
    }
    return strawberry.field(resolver=resolve, name=view.point_field)


def _count_many(view: View, row_type: type) -> StrawberryField:
    def resolve(info: strawberry.Info, keys: list[str]) -> Any:
        context = _context(info)
        if len(keys) > MAX_KEYS:
            raise BadRequestError(view.name, f"at most {MAX_KEYS} {view.keys_arg} per request")
        partition_count = _partition_count(view, context)
        by_partition: dict[int, list[int]] = {}
        for index, key in enumerate(keys):
            _check_key(view, key)
            by_partition.setdefault(partition_for(key, partition_count), []).append(index)
        foreign = [p for p in by_partition if not context.registry.holds(p)]
        if foreign:
            first = foreign[0]  # dict order: the partition of the first foreign key
            key = keys[by_partition[first][0]]
            raise NotOwnerError(view.name, first, context.node_id, key, sorted(foreign))
        rows: list[CountRow | None] = [None] * len(keys)
        for partition, indexes in by_partition.items():
            wanted = [keys[i] for i in indexes]
            reader = methodcaller("get_many", view.name, wanted)
            found = context.read(view, partition, reader, wanted[0])
            for index, row in zip(indexes, found, strict=True):
                rows[index] = row
        return rows

    resolve.__annotations__ = {
        "info": strawberry.Info,
        "keys": Annotated[list[str], strawberry.argument(name=view.keys_arg)],
        "return": list[Optional[row_type]],  # type: ignore[valid-type]  # noqa: UP045
    }
    return strawberry.field(resolver=resolve, name=view.many_field)


def _top_partitions(view: View, context: ReadContext, partitions: list[int] | None) -> list[int]:
    if partitions is None:
        return context.registry.partitions(Role.ACTIVE)
    partition_count = _partition_count(view, context)
    wanted = list(dict.fromkeys(partitions))
    for partition in wanted:
        if not 0 <= partition < partition_count:
            raise BadRequestError(
                view.name, f"partition {partition} is outside 0..{partition_count - 1}"
            )
    foreign = [p for p in wanted if not context.registry.holds(p)]
    if foreign:
        raise NotOwnerError(view.name, foreign[0], context.node_id, partitions=sorted(foreign))
    return wanted


def _count_top(view: View, row_type: type) -> StrawberryField:
    def resolve(info: strawberry.Info, limit: int, partitions: Any = strawberry.UNSET) -> Any:
        context = _context(info)
        # UNSET (not None) as the default keeps the SDL at `partitions: [Int!]`
        if partitions is strawberry.UNSET:
            partitions = None
        if not 1 <= limit <= MAX_TOP_LIMIT:
            raise BadRequestError(view.name, f"limit must be in 1..{MAX_TOP_LIMIT}, got {limit}")
        explicit = partitions is not None
        reader = methodcaller("top", view.name, limit)
        tops: list[list[CountRow]] = []
        for partition in _top_partitions(view, context, partitions):
            if explicit:
                tops.append(context.read(view, partition, reader, None))
            # the default set is "what the node holds now": a partition revoked meanwhile is skipped
            elif (found := context.try_read(partition, reader)) is not None:
                tops.append(found[0])
        merged = heapq.merge(*tops, key=lambda row: (-row.count, row.key))
        return list(itertools.islice(merged, limit))

    resolve.__annotations__ = {
        "info": strawberry.Info,
        "limit": int,
        "partitions": Optional[list[int]],  # noqa: UP045
        "return": list[row_type],  # type: ignore[valid-type]
    }
    return strawberry.field(resolver=resolve, name=view.top_field)


def _count_fields(view: View) -> dict[str, StrawberryField]:
    row_type = _count_type(view)
    return {
        view.point_field: _count_point(view, row_type),
        view.many_field: _count_many(view, row_type),
        view.top_field: _count_top(view, row_type),
    }


# one builder per view kind: the fields of Query for one view of that kind
_BUILDERS: dict[ViewKind, Callable[[View], dict[str, StrawberryField]]] = {
    ViewKind.COUNT: _count_fields,
}


class _MarkExecuted(SchemaExtension):
    """Tells the error formatter that parse and validation passed (`ReadContext.executed`)."""

    def on_execute(self):  # type: ignore[no-untyped-def]
        context = self.execution_context.context
        if isinstance(context, ReadContext):
            context.executed = True
        yield


class _SubgraphSchema(strawberry.Schema):
    """Logs only failures of fields; refused requests (QueryError), invalid documents and
    variables (no path) are the caller's business, and logging each would flood the log."""

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            if error.path is not None and not isinstance(error.original_error, QueryError):
                StrawberryLogger.error(error, execution_context)


def build_subgraph(catalogue: Iterable[View] = CATALOGUE) -> strawberry.Schema:
    """The strawberry schema of the node subgraph for every view of `catalogue`."""
    fields: dict[str, StrawberryField] = {}
    for view in catalogue:
        builder = _BUILDERS.get(view.kind)
        if builder is None:
            raise NodeError(f"view {view.name}: kind {view.kind.value} is not served yet")
        for name, view_field in builder(view).items():
            if name in fields:
                raise NodeError(f"view {view.name}: field {name} is defined by two views")
            fields[name] = view_field
    query = strawberry.type(type("Query", (), fields))
    return _SubgraphSchema(
        query=query,
        extensions=[
            lambda: ParserCache(maxsize=_DOCUMENT_CACHE_SIZE),
            lambda: ValidationCache(maxsize=_DOCUMENT_CACHE_SIZE),
            _MarkExecuted,
        ],
    )
