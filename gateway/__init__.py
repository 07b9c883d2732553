"""The statefed gateway: one GraphQL endpoint over the nodes' partitions, and an Apollo
Federation v2 subgraph.

Routing from membership, lookups grouped per owning node, a key's windows and history
from its owner, top-N fanned out to every partition and merged, partial results for
what cannot be read, and the pipeline's status per view.
"""

from gateway.api.schema import build_schema, print_sdl
from gateway.cluster.consistency import AppliedAtLeast, Token, parse_token, wait_processed
from gateway.cluster.membership import MemberDirectory, MembershipReader, find_start_offset
from gateway.cluster.pipeline import PipelineStatusReader, StatusBoard
from gateway.cluster.routing import (
    Disclaimers,
    LastOwner,
    NodeInfo,
    RoutingFeed,
    RoutingTable,
    build_routing_table,
)
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp, health_body
from gateway.edge.server import run_gateway
from gateway.execute.limits import QueryLimits
from gateway.model.errors import (
    BadRepresentationError,
    BadRequestError,
    ConsistencyTimeoutError,
    ForbiddenError,
    GatewayError,
    IntrospectionDisabledError,
    NodeProtocolError,
    NodeSuspectError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotCaughtUpError,
    NotOwnerError,
    PartitionNeverAssignedError,
    PartitionUnassignedError,
    ProduceDisabledError,
    ProduceError,
    QueryLimitError,
    QueryTooCostlyError,
    QueryTooDeepError,
    RateLimitedError,
    Reason,
    RoutingError,
    RoutingNotReadyError,
    SlowSubscriberError,
    SubscriptionsOffError,
    TooManyAliasesError,
    TooManyRepresentationsError,
    TooManyRootFieldsError,
)
from gateway.model.principal import ANONYMOUS, Principal
from gateway.model.rows import Edge, Event, Page, Row, WindowCount
from gateway.nodes.documents import ViewQueries
from gateway.nodes.hedging import NodeWatch
from gateway.nodes.upstream import Upstream
from gateway.reads.planner import KeyRead, LookupResult, Planner, ReadOptions, TopResult
from gateway.writes.producer import EventProducer

__all__ = [
    "ANONYMOUS",
    "AppliedAtLeast",
    "BadRepresentationError",
    "BadRequestError",
    "ConsistencyTimeoutError",
    "Disclaimers",
    "Edge",
    "Event",
    "EventProducer",
    "ForbiddenError",
    "GatewayApp",
    "GatewayConfig",
    "GatewayError",
    "IntrospectionDisabledError",
    "KeyRead",
    "LastOwner",
    "LookupResult",
    "MemberDirectory",
    "MembershipReader",
    "NodeInfo",
    "NodeProtocolError",
    "NodeSuspectError",
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NodeWatch",
    "NotCaughtUpError",
    "NotOwnerError",
    "Page",
    "PartitionNeverAssignedError",
    "PartitionUnassignedError",
    "PipelineStatusReader",
    "Planner",
    "Principal",
    "ProduceDisabledError",
    "ProduceError",
    "QueryLimitError",
    "QueryLimits",
    "QueryTooCostlyError",
    "QueryTooDeepError",
    "RateLimitedError",
    "ReadOptions",
    "Reason",
    "RoutingError",
    "RoutingFeed",
    "RoutingNotReadyError",
    "RoutingTable",
    "Row",
    "SlowSubscriberError",
    "StatusBoard",
    "SubscriptionsOffError",
    "Token",
    "TooManyAliasesError",
    "TooManyRepresentationsError",
    "TooManyRootFieldsError",
    "TopResult",
    "Upstream",
    "ViewQueries",
    "WindowCount",
    "build_routing_table",
    "build_schema",
    "find_start_offset",
    "health_body",
    "parse_token",
    "print_sdl",
    "run_gateway",
    "wait_processed",
]
