"""The statefed gateway: one GraphQL endpoint over the nodes' partitions.

Routing from membership, lookups grouped per owning node, top-N fanned out to every
partition and merged, partial results for what cannot be read.
"""

from gateway.app import GatewayApp, health_body
from gateway.config import GatewayConfig
from gateway.errors import (
    BadRequestError,
    GatewayError,
    NodeProtocolError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotOwnerError,
    PartitionUnassignedError,
    RoutingError,
    RoutingNotReadyError,
)
from gateway.membership import MemberDirectory, MembershipReader, find_start_offset
from gateway.planner import LookupResult, Planner, Row, TopResult
from gateway.routing import Disclaimers, NodeInfo, RoutingFeed, RoutingTable, build_routing_table
from gateway.schema import build_schema
from gateway.server import run_gateway
from gateway.upstream import Upstream, ViewQueries, make_clients

__all__ = [
    "BadRequestError",
    "Disclaimers",
    "GatewayApp",
    "GatewayConfig",
    "GatewayError",
    "LookupResult",
    "MemberDirectory",
    "MembershipReader",
    "NodeInfo",
    "NodeProtocolError",
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NotOwnerError",
    "PartitionUnassignedError",
    "Planner",
    "RoutingError",
    "RoutingFeed",
    "RoutingNotReadyError",
    "RoutingTable",
    "Row",
    "TopResult",
    "Upstream",
    "ViewQueries",
    "build_routing_table",
    "build_schema",
    "find_start_offset",
    "health_body",
    "make_clients",
    "run_gateway",
]
