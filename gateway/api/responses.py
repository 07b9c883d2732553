"""The one place where the gateway's exceptions become GraphQL errors.

GatewayError subclasses bring their own `extensions.code` (`gateway_extensions`); the codes
every server shares (parse, validation, variables, internal) come from
`runtime.graphql_http`. Partitions a field could not read become one PARTITION_UNAVAILABLE
error each (CONSISTENCY_TIMEOUT when the node had not caught up with an `atLeast` token),
next to the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphql import GraphQLError

from gateway.api.request import MissingPartition
from gateway.model.errors import GatewayError
from runtime.graphql_http import INTERNAL_SERVER_ERROR, error_extensions

__all__ = ["format_missing", "gateway_extensions", "in_answer_order", "is_server_fault"]


def gateway_extensions(original: Exception) -> dict[str, Any] | None:
    """The `extensions` of an error the gateway raised on purpose; None for any other."""
    return original.extensions() if isinstance(original, GatewayError) else None


def is_server_fault(error: GraphQLError) -> bool:
    """True for errors the client did not cause: bugs, not bad input or unavailable data."""
    return error_extensions(error, gateway_extensions)["code"] == INTERNAL_SERVER_ERROR


def in_answer_order(
    missing: Iterable[MissingPartition], data: Mapping[str, Any] | None
) -> list[MissingPartition]:
    """`missing` in the order of the answer: by the root field's place in `data` (the
    fields as the query asked them; a root not in it last), then by path and partition.
    The reads of a request's root fields run concurrently and record what they could not
    read as they finish, so without this the order of the errors would depend on which
    node answered first."""
    roots = {name: place for place, name in enumerate(data or ())}

    def place(one: MissingPartition) -> tuple[int, tuple[tuple[int, str], ...], int]:
        steps = tuple((s, "") if isinstance(s, int) else (-1, s) for s in one.path)
        root = str(one.path[0]) if one.path else ""
        return roots.get(root, len(roots)), steps, one.partition

    return sorted(missing, key=place)


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
