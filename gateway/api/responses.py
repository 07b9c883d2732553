"""The one place where the gateway's exceptions become GraphQL errors.

GatewayError subclasses bring their own `extensions.code` (`gateway_extensions`); the codes
every server shares (parse, validation, variables, internal) come from
`runtime.graphql_http`. Partitions a field could not read become one PARTITION_UNAVAILABLE
error each (CONSISTENCY_TIMEOUT when the node had not caught up with an `atLeast` token),
next to the data.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError

from gateway.api.request import MissingPartition
from gateway.model.errors import GatewayError
from runtime.graphql_http import INTERNAL_SERVER_ERROR, error_extensions

__all__ = ["format_missing", "gateway_extensions", "is_server_fault"]


def gateway_extensions(original: Exception) -> dict[str, Any] | None:
    """The `extensions` of an error the gateway raised on purpose; None for any other."""
    return original.extensions() if isinstance(original, GatewayError) else None


def is_server_fault(error: GraphQLError) -> bool:
    """True for errors the client did not cause: bugs, not bad input or unavailable data."""
    return error_extensions(error, gateway_extensions)["code"] == INTERNAL_SERVER_ERROR


def format_missing(missing: MissingPartition) -> dict[str, Any]:
    """The error of one partition a field could not read."""
    error = missing.error
    keys = ", ".join(repr(k) for k in missing.keys[:3])
    keys += f" and {len(missing.keys) - 3} more" if len(missing.keys) > 3 else ""
    of_keys = f" (holding {keys})" if keys else ""
    on_node = f" on node {error.node}" if error.node and error.node_was_asked else ""
    return {
        "message": f"view {error.view}: partition {missing.partition}{of_keys} is unavailable"
        f"{on_node}: {error.detail}",
        "path": list(missing.path),
        "extensions": error.partition_extensions(missing.partition),
    }
