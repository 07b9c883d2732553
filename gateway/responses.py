"""The one place where results and exceptions become GraphQL response bodies.

Every error gets `extensions.code`: GatewayError subclasses bring their own code;
syntax errors are GRAPHQL_PARSE_FAILED, other errors before execution
GRAPHQL_VALIDATION_FAILED, variable values that don't fit BAD_USER_INPUT. Partitions a
field could not read become one PARTITION_UNAVAILABLE error each (CONSISTENCY_TIMEOUT when
the node had not caught up with an `atLeast` token), next to the data.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError, GraphQLSyntaxError
from strawberry.types.execution import ExecutionResult, PreExecutionError

from gateway.errors import GatewayError
from gateway.request import MissingPartition, RequestContext

__all__ = ["error_code", "is_server_fault", "request_error", "response_body"]


def error_code(error: GraphQLError, before_execution: bool) -> dict[str, Any]:
    """The `extensions` of `error`, with its code."""
    original = error.original_error
    if isinstance(original, GatewayError):
        return original.extensions()
    if isinstance(error, GraphQLSyntaxError):
        return {"code": "GRAPHQL_PARSE_FAILED"}
    if original is None and before_execution:
        return {"code": "GRAPHQL_VALIDATION_FAILED"}
    if error.path is None and (original is None or isinstance(original, GraphQLError)):
        # raised by graphql-core before any resolver ran: variables that don't coerce,
        # an operation name that names no operation
        return {"code": "BAD_USER_INPUT"}
    return {"code": "INTERNAL_SERVER_ERROR"}


def is_server_fault(error: GraphQLError) -> bool:
    """True for errors the client did not cause: bugs, not bad input or unavailable data."""
    return error_code(error, before_execution=False)["code"] == "INTERNAL_SERVER_ERROR"


def _format(error: GraphQLError, before_execution: bool) -> dict[str, Any]:
    formatted = dict(error.formatted)
    formatted["extensions"] = {**(error.extensions or {}), **error_code(error, before_execution)}
    return formatted


def _format_missing(missing: MissingPartition) -> dict[str, Any]:
    error = missing.error
    keys = ", ".join(repr(k) for k in missing.keys[:3])
    keys += f" and {len(missing.keys) - 3} more" if len(missing.keys) > 3 else ""
    of_keys = f" (holding {keys})" if keys else ""
    on_node = f" on node {error.node}" if error.node else ""
    return {
        "message": f"view {error.view}: partition {missing.partition}{of_keys} is unavailable"
        f"{on_node}: {error.detail}",
        "path": list(missing.path),
        "extensions": {
            "code": error.partition_code,
            "reason": error.reason,
            "view": error.view,
            "partition": missing.partition,
            "node": error.node,
        },
    }


def response_body(result: ExecutionResult, context: RequestContext) -> dict[str, Any]:
    """The JSON body of a GraphQL response: errors, data (when execution ran), extensions."""
    before_execution = isinstance(result, PreExecutionError)
    errors = [_format(e, before_execution) for e in result.errors or ()]
    errors.extend(_format_missing(m) for m in context.missing)
    body: dict[str, Any] = {}
    if errors:
        body["errors"] = errors
    if not before_execution:
        body["data"] = result.data
        body["extensions"] = {"freshness": context.freshness_list()}
    return body


def request_error(message: str, code: str = "BAD_REQUEST") -> dict[str, Any]:
    """The body of a request that never reached GraphQL (not JSON, no query, ...)."""
    return {"errors": [{"message": message, "extensions": {"code": code}}]}
