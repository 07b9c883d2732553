"""The statefed gateway: one GraphQL endpoint over the nodes' partitions, and an Apollo
Federation v2 subgraph.

Routing from membership, lookups grouped per owning node, a key's windows and history
from its owner, top-N fanned out to every partition and merged, partial results for
what cannot be read, and the pipeline's status per view.
"""

from gateway.app import GatewayApp, health_body
from gateway.config import GatewayConfig
from gateway.consistency import AppliedAtLeast, Token, parse_token, wait_processed
from gateway.documents import ViewQueries
from gateway.errors import (
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
from gateway.hedging import NodeWatch
from gateway.limits import QueryLimits
from gateway.membership import MemberDirectory, MembershipReader, find_start_offset
from gateway.planner import KeyRead, LookupResult, Planner, ReadOptions, TopResult
from gateway.principal import ANONYMOUS, Principal
from gateway.producer import EventProducer
from gateway.routing import (
    Disclaimers,
    LastOwner,
    NodeInfo,
    RoutingFeed,
    RoutingTable,
    build_routing_table,
)
from gateway.rows import Edge, Event, Page, Row, WindowCount
from gateway.schema import build_schema, print_sdl
from gateway.server import run_gateway
from gateway.status import PipelineStatusReader, StatusBoard
from gateway.upstream import Upstream

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
