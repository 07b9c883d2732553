"""The public GraphQL schema, generated from the view catalogue.

Each view kind has one builder that turns a catalogue entry into its type and query
fields; adding a view of an existing kind needs no code here. `cluster` shows membership
and routing. Parsed and validated documents are cached.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, cast

import strawberry
from graphql import GraphQLError
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.types.execution import ExecutionContext

from gateway.planner import Row
from gateway.request import KeyResult, RequestContext
from gateway.responses import is_server_fault
from schema import CATALOGUE, NodeState, Role, View, ViewKind

__all__ = ["build_schema"]

log = logging.getLogger(__name__)

_CACHE_SIZE = 1024  # distinct documents whose parse and validation are kept


def _mirror(source: type[enum.Enum], description: str) -> Any:
    """A GraphQL enum with the members of `source` (which stays untouched by strawberry)."""
    members = {m.name: m.value for m in source}
    return strawberry.enum(cast(Any, enum.Enum(source.__name__, members)), description=description)


NodeStateEnum = _mirror(
    NodeState, "What a node is doing: starting, rebalancing, restoring a partition, running."
)
RoleEnum = _mirror(
    Role, "ACTIVE copies serve reads; STANDBY copies follow the changelog as spares."
)


@strawberry.type(description="A node, as its newest membership record describes it.")
class ClusterNode:
    id: str
    url: str
    state: NodeStateEnum  # type: ignore[valid-type]
    alive: bool = strawberry.field(description="Heartbeat newer than 3 heartbeat intervals.")
    heartbeat_age_ms: int
    active: list[int]
    standby: list[int]


@strawberry.type(description="One copy of a partition held by a live node.")
class ClusterPartition:
    partition: int
    node: str
    role: RoleEnum  # type: ignore[valid-type]
    applied_offset: int
    end_offset: int
    lag: int


@strawberry.type(description="Membership and routing as the gateway sees them now.")
class Cluster:
    routing_version: int
    partition_count: int | None = strawberry.field(
        description="P, partitions per view, from topic metadata; null until read."
    )
    nodes: list[ClusterNode]
    partitions: list[ClusterPartition]
    unassigned: list[int] = strawberry.field(description="Partitions without a live ACTIVE owner.")


def _cluster(info: strawberry.Info) -> Cluster:
    context: RequestContext = info.context
    table = context.feed.current
    now = context.clock()
    nodes = sorted(table.nodes.values(), key=lambda n: n.node_id)
    count = table.max_partition_count()
    return Cluster(
        routing_version=table.version,
        partition_count=count,
        nodes=[
            ClusterNode(
                id=n.node_id,
                url=n.url,
                state=NodeStateEnum[n.state.name],
                alive=n.alive,
                heartbeat_age_ms=max(0, now - n.heartbeat_ms),
                active=n.active(),
                standby=n.standby(),
            )
            for n in nodes
        ],
        partitions=sorted(
            (
                ClusterPartition(
                    partition=p.partition,
                    node=n.node_id,
                    role=RoleEnum[p.role.name],
                    applied_offset=p.applied_offset,
                    end_offset=p.end_offset,
                    lag=p.lag,
                )
                for n in nodes
                if n.alive
                for p in n.partitions
            ),
            key=lambda c: (c.partition, c.node),
        ),
        unassigned=[p for p in range(count or 0) if not table.claims.get(p)],
    )


def _record_missing(
    context: RequestContext, info: strawberry.Info, results: Sequence[KeyResult]
) -> None:
    by_partition: dict[int, list[KeyResult]] = {}
    for result in results:
        if result.error is not None:
            by_partition.setdefault(result.partition, []).append(result)
    path = info.path.as_list()
    for partition, failed in sorted(by_partition.items()):
        keys = list(dict.fromkeys(r.key for r in failed))
        context.add_missing(path, partition, failed[0].error, keys)  # type: ignore[arg-type]


def _count_fields(view: View) -> dict[str, Any]:
    """Point lookup, multi-key lookup and top-N of a COUNT view."""
    row_type = strawberry.type(
        type(view.type_name, (), {"__annotations__": {view.key_field: str, "count": int}}),
        description=f"Events counted per {view.key_field} (view {view.name}, topic {view.topic}).",
    )

    def to_type(row: Row | None) -> Any:
        return None if row is None else row_type(**{view.key_field: row.key, "count": row.count})

    async def point(
        info: strawberry.Info, key: Annotated[str, strawberry.argument(name=view.key_field)]
    ) -> row_type | None:  # type: ignore[valid-type]
        context: RequestContext = info.context
        context.planner.check_keys(view, [key])
        result = await context.loader(view).load(key)
        _record_missing(context, info, [result])
        return to_type(result.row)

    async def many(
        info: strawberry.Info, keys: Annotated[list[str], strawberry.argument(name=view.keys_arg)]
    ) -> list[row_type | None]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        context.planner.check_keys(view, keys)
        results = await context.loader(view).load_many(keys)
        _record_missing(context, info, results)
        return [to_type(r.row) for r in results]

    async def top(info: strawberry.Info, limit: int = 10) -> list[row_type]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        result = await context.planner.top(view, limit, context.deadline)
        context.add_freshness(result.freshness)
        path = info.path.as_list()
        for partition, error in sorted(result.failures.items()):
            context.add_missing(path, partition, error, ())
        return [to_type(r) for r in result.rows]

    noun = f"{view.key_field} of view {view.name}"
    return {
        view.point_field: strawberry.field(
            resolver=point,
            name=view.point_field,
            description=f"The count of one {noun}; null if unknown.",
        ),
        view.many_field: strawberry.field(
            resolver=many,
            name=view.many_field,
            description=f"Counts of several {view.keys_arg}, in the order asked; null if unknown.",
        ),
        view.top_field: strawberry.field(
            resolver=top,
            name=view.top_field,
            description=f"The `limit` most counted {view.keys_arg} (count desc, then "
            f"{view.key_field} asc) of view {view.name}.",
        ),
    }


_BUILDERS: dict[ViewKind, Callable[[View], dict[str, Any]]] = {ViewKind.COUNT: _count_fields}


class _Schema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # a client's mistake or a partition being unavailable is an answer, not a server fault
        for error in errors:
            if is_server_fault(error):
                log.error("query failed: %s", error, exc_info=error.original_error)


def build_schema(catalogue: Iterable[View] = CATALOGUE) -> strawberry.Schema:
    """The gateway's schema for `catalogue`: per view the fields its kind defines, plus cluster."""
    fields: dict[str, Any] = {}
    for view in catalogue:
        builder = _BUILDERS.get(view.kind)
        if builder is None:
            raise ValueError(f"view {view.name}: kind {view.kind.value} has no gateway builder yet")
        for name, field in builder(view).items():
            if name in fields or name == "cluster":
                raise ValueError(f"view {view.name}: field {name} is defined twice")
            fields[name] = field
    fields["cluster"] = strawberry.field(
        resolver=_cluster, description="Nodes, partition copies, roles and lag, from membership."
    )
    query = strawberry.type(type("Query", (), fields))
    return _Schema(
        query=query,
        extensions=[
            lambda: ParserCache(maxsize=_CACHE_SIZE),
            lambda: ValidationCache(maxsize=_CACHE_SIZE),
        ],
    )
