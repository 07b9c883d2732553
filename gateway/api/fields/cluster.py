"""The public `cluster` field: nodes, partition copies and routing from membership, and the
views of the catalogue with what the pipeline reports about them."""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import enum
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import strawberry

from gateway.api.fields.common import authorize
from gateway.api.request import RequestContext
from gateway.cluster.overview import live_copies, unassigned
from gateway.cluster.routing import RoutingTable
from gateway.model.timestamps import from_ms
from runtime.valuetypes import Long
from schema import NodeState, Role, View, ViewKind

__all__ = ["cluster_field"]


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
ViewKindEnum = _mirror(
    ViewKind,
    "COUNT: events per key; WINDOWED_COUNT: events per key and window (tumbling, hopping or "
    "session); LATEST: the newest event per key; HISTORY: every event of a key; AGGREGATE: "
    "per key, the view's aggregates (sums, averages, distinct counts...) over its events; "
    "WINDOWED_AGGREGATE: the same per key and window.",
)


def _node_url(root: Any, info: strawberry.Info) -> str | None:
    context: RequestContext = info.context
    if context.config.authenticates:
        authorize(context, context.config.operator_scope, f"the URL of node {root.id}")
    return cast(str, root.node_url)


def _store_error(root: Any, info: strawberry.Info) -> str | None:
    context: RequestContext = info.context
    if context.config.authenticates:  # its text may name the node's files
        authorize(
            context, context.config.operator_scope, f"partition {root.partition}'s store error"
        )
    return cast(str | None, root.store_error_text)


@strawberry.type(description="A node, as its newest membership record describes it.")
class ClusterNode:
    id: str
    url: str | None = strawberry.field(
        resolver=_node_url,
        description="Where the gateway calls the node. With authentication on, null (and a "
        "FORBIDDEN error at this path) unless the token has the operator scope.",
    )
    node_url: strawberry.Private[str]
    state: NodeStateEnum  # type: ignore[valid-type]
    alive: bool = strawberry.field(description="Heartbeat newer than 3 heartbeat intervals.")
    suspect: bool = strawberry.field(
        description="Alive, but not asked for now: its heartbeat is 2 intervals behind the "
        "other nodes', or it left calls without an answer; its partitions are read from "
        "standbys within maxLag, or fail at once with PARTITION_UNAVAILABLE (SUSPECT)."
    )
    heartbeat_age_ms: int
    active: list[int]
    standby: list[int]


@strawberry.type(description="One copy of a partition held by a live node.")
class ClusterPartition:
    partition: int
    node: str
    role: RoleEnum  # type: ignore[valid-type]
    applied_offset: Long
    end_offset: Long
    lag: Long
    restoring: bool = strawberry.field(
        description="Catching up since the node got this copy (on assignment or restart)."
    )
    restore_done: int = strawberry.field(description="Records restored so far.")
    restore_total: int = strawberry.field(
        description="Records to restore when the copy was assigned; 0 until known."
    )
    lag_unknown_since: datetime | None = strawberry.field(
        description="Since when the node has not known this copy's lag (the broker did not "
        "answer it): endOffset and lag are as of then. Null while the lag is known."
    )
    store_error_text: strawberry.Private[str | None]
    store_error: str | None = strawberry.field(
        resolver=_store_error,
        description="Why the copy's store cannot be written now (e.g. a full disk): the "
        "node has paused applying it and retries; null when it can. With authentication "
        "on, null (and a FORBIDDEN error at this path) unless the token has the operator "
        "scope.",
    )


@strawberry.type(description="A view of the catalogue, and the pipeline's newest report on it.")
class ClusterView:
    name: str
    kind: ViewKindEnum  # type: ignore[valid-type]
    late_dropped: int = strawberry.field(
        description="Events dropped for arriving after the window's grace period, since the "
        "view's checkpoint began; 0 until the pipeline reports."
    )
    status_updated_at: datetime | None = strawberry.field(
        description="When the pipeline last reported on the view; null if not yet."
    )


@strawberry.type(description="Membership and routing as the gateway sees them now.")
class Cluster:
    routing_version: int
    routing_stale_since: datetime | None = strawberry.field(
        description="Since when membership has brought no news because the broker does not "
        "answer: nodes, copies and routing are kept as they were then (no node is judged "
        "dead for the silence). Null while membership is current."
    )
    partition_count: int | None = strawberry.field(
        description="P, partitions per view, from topic metadata; null until read."
    )
    nodes: list[ClusterNode]
    partitions: list[ClusterPartition]
    unassigned: list[int] = strawberry.field(description="Partitions without a live ACTIVE owner.")
    views: list[ClusterView]


def _views(context: RequestContext, catalogue: Sequence[View]) -> list[ClusterView]:
    views = []
    for view in catalogue:
        status = context.statuses.get(view.name)
        views.append(
            ClusterView(
                name=view.name,
                kind=ViewKindEnum[view.kind.name],
                late_dropped=status.late_dropped if status else 0,
                status_updated_at=from_ms(status.updated_ms) if status else None,
            )
        )
    return views


def _partitions(table: RoutingTable) -> list[ClusterPartition]:
    return [
        ClusterPartition(
            partition=p.partition,
            node=node_id,
            role=RoleEnum[p.role.name],
            applied_offset=Long(p.applied_offset),
            end_offset=Long(p.end_offset),
            lag=Long(p.lag),
            restoring=p.restoring,
            restore_done=p.restore_done,
            restore_total=p.restore_total,
            lag_unknown_since=_from_ms(p.lag_unknown_since_ms),
            store_error_text=p.store_error,
        )
        for node_id, p in live_copies(table)
    ]


def _from_ms(ms: int | None) -> datetime | None:
    return None if ms is None else from_ms(ms)


def cluster_field(catalogue: Sequence[View]) -> Any:
    """The `cluster` field over `catalogue`."""

    def cluster(info: strawberry.Info) -> Cluster:
        context: RequestContext = info.context
        table = context.feed.current
        now = context.clock()
        nodes = sorted(table.nodes.values(), key=lambda n: n.node_id)
        suspects = context.planner.suspects(table)
        count = table.max_partition_count()
        return Cluster(
            routing_version=table.version,
            routing_stale_since=_from_ms(table.stale_since_ms),
            partition_count=count,
            nodes=[
                ClusterNode(
                    id=n.node_id,
                    node_url=n.url,
                    state=NodeStateEnum[n.state.name],
                    alive=n.alive,
                    suspect=n.alive and n.node_id in suspects,
                    heartbeat_age_ms=max(0, now - n.heartbeat_ms),
                    active=n.active(),
                    standby=n.standby(),
                )
                for n in nodes
            ],
            partitions=_partitions(table),
            unassigned=unassigned(table),
            views=_views(context, catalogue),
        )

    return strawberry.field(
        resolver=cluster,
        description="Nodes, partition copies, roles and lag from membership; views and "
        "what the pipeline reports about them.",
    )
