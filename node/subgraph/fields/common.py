"""What the field builders of every view kind share: argument checks, reads by key, by
keys and by partitions (with NOT_OWNER for what this node does not hold), and the GraphQL
types shared by all views."""

# No `from __future__ import annotations`: strawberry must see the types, not strings.

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import strawberry
from strawberry.types.field import StrawberryField

from node.errors import BadRequestError
from node.storage.store import PartitionStore
from node.subgraph.fields.context import ReadContext
from schema import Role, View

__all__ = [
    "MAX_KEYS",
    "MAX_TOP_LIMIT",
    "PageInfo",
    "WindowInput",
    "check_limit",
    "given",
    "query_field",
    "read_each",
    "read_key",
    "read_keys",
    "read_partitions",
]

MAX_TOP_LIMIT = 10_000
MAX_KEYS = 10_000

T = TypeVar("T")
R = TypeVar("R")


@strawberry.input(description="One window, named by its first instant (UTC).")
class WindowInput:
    start: datetime


@strawberry.type(description="Where a page of a connection ends and whether more follow.")
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


def query_field(resolver: Callable[..., Any], name: str) -> StrawberryField:
    """A field of Query named `name`, resolved by `resolver`."""
    field: StrawberryField = strawberry.field(resolver=resolver, name=name)
    return field


def given(value: Any) -> Any:
    """An optional argument's value, None when omitted."""
    return None if value is strawberry.UNSET else value


def check_key(view: View, key: str) -> None:
    if not key:
        raise BadRequestError(view.name, f"{view.key_field} must not be empty")


def check_limit(view: View, limit: int) -> None:
    if not 1 <= limit <= MAX_TOP_LIMIT:
        raise BadRequestError(view.name, f"limit must be in 1..{MAX_TOP_LIMIT}, got {limit}")


def read_each(
    view: View, context: ReadContext, readers: Mapping[int, Callable[[PartitionStore], T]]
) -> dict[int, T]:
    """Each partition's own reader on it, by partition; one NOT_OWNER naming every partition
    asked that is not held here."""
    chosen = _chosen_partitions(view, context, list(readers))
    return {p: context.read(view, p, readers[p], None) for p in chosen}


def _partition_of(view: View, key: str, partitions: int) -> int:
    """The partition of `key`; BAD_USER_INPUT when it is no key text of the view's key type
    (an int key's hex digits, say): a caller's mistake, not the node's."""
    try:
        return view.partition_of(key, partitions)
    except ValueError as exc:
        raise BadRequestError(view.name, f"{view.key_field}: {exc}") from exc


def _partition_count(view: View, context: ReadContext) -> int:
    return context.registry.partition_count(view.changelog_topic)


def read_key(
    view: View, context: ReadContext, key: str, reader: Callable[[PartitionStore], T]
) -> T:
    """`reader` on the partition of `key`; NOT_OWNER when this node does not hold it."""
    check_key(view, key)
    partition = _partition_of(view, key, _partition_count(view, context))
    return context.read(view, partition, reader, key)


def read_keys(
    view: View,
    context: ReadContext,
    keys: list[str],
    reader: Callable[[list[str]], Callable[[PartitionStore], list[R | None]]],
) -> list[R | None]:
    """One row per key in input order, each partition read once with `reader(its keys)`;
    one NOT_OWNER naming the first foreign partition when any key is not held here."""
    if len(keys) > MAX_KEYS:
        raise BadRequestError(view.name, f"at most {MAX_KEYS} {view.keys_arg} per request")
    partition_count = _partition_count(view, context)
    by_partition: dict[int, list[int]] = {}
    for index, key in enumerate(keys):
        check_key(view, key)
        by_partition.setdefault(_partition_of(view, key, partition_count), []).append(index)
    if len(by_partition) > 1:  # one partition: its read says whether it is held
        foreign = [p for p in by_partition if not context.holds(p)]
        if foreign:
            first = foreign[0]  # dict order: the partition of the first foreign key
            key = keys[by_partition[first][0]]
            raise context.not_owner(view, first, key, sorted(foreign))
    rows: list[R | None] = [None] * len(keys)
    for partition, indexes in by_partition.items():
        wanted = [keys[i] for i in indexes]
        found = context.try_read(view, partition, reader(wanted))
        if found is None:
            raise context.not_owner(view, partition, wanted[0], [partition])
        for index, row in zip(indexes, found[0], strict=True):
            rows[index] = row
    return rows


def _chosen_partitions(view: View, context: ReadContext, partitions: list[int]) -> list[int]:
    partition_count = _partition_count(view, context)
    wanted = list(dict.fromkeys(partitions))
    for partition in wanted:
        if not 0 <= partition < partition_count:
            raise BadRequestError(
                view.name, f"partition {partition} is outside 0..{partition_count - 1}"
            )
    foreign = [p for p in wanted if not context.holds(p)]
    if foreign:
        raise context.not_owner(view, foreign[0], partitions=sorted(foreign))
    return wanted


def read_partitions(
    view: View,
    context: ReadContext,
    partitions: list[int] | None,
    reader: Callable[[PartitionStore], T],
) -> list[T]:
    """`reader` on each of `partitions` (NOT_OWNER if one is not held), or by default on
    every partition the node holds ACTIVE now."""
    if partitions is not None:
        chosen = _chosen_partitions(view, context, partitions)
        return [context.read(view, partition, reader, None) for partition in chosen]
    results = []
    for partition in context.registry.partitions(Role.ACTIVE):
        # "what the node holds now": a partition revoked meanwhile is skipped
        found = context.try_read(view, partition, reader)
        if found is not None:
            results.append(found[0])
    return results
