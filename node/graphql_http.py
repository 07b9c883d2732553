"""GraphQL over HTTP for the node: `POST /graphql` as a raw ASGI handler.

It executes the strawberry subgraph's GraphQLSchema synchronously with graphql-core (the
resolvers are LevelDB reads that take microseconds), each distinct document parsed and
validated once, serializes with orjson, and adds `extensions.freshness`: one entry
per partition the request read. Only ACTIVE copies are read unless the request's
`extensions` say `{"readStandby": true}`; `{"appliedAtLeast": ...}` makes the request wait
until the copies read have applied given changelog offsets (node.catchup). `format_error`
is the one place where exceptions become GraphQL errors with `extensions.code`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import orjson
import strawberry
from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    execute_sync,
    parse,
    validate,
)
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types.graphql import OperationType

from node.asgi import Receive, Scope, Send, read_body, send_json
from node.catchup import AppliedAtLeast, parse_applied_at_least, wait_applied
from node.errors import MalformedRequestError, NodeError, NotCaughtUpError, QueryError
from node.partitions import PartitionRegistry
from node.subgraph import ReadContext
from runtime.clock import Clock, wall_clock_ms
from schema import READ_STANDBY, Role

__all__ = ["GraphQLEndpoint", "error_extensions", "format_error"]

MAX_BODY_BYTES = 1 << 20
_DOCUMENT_CACHE_SIZE = 1024  # distinct query texts kept parsed and validated
# without READ_STANDBY in the request extensions (the gateway falling back), a read is
# answered from ACTIVE copies only
_ACTIVE_ONLY = (Role.ACTIVE,)
_QUERIES_ONLY = (OperationType.QUERY,)


def error_extensions(error: GraphQLError, executed: bool) -> dict[str, Any]:
    """`extensions` of a GraphQL error; `executed` = parse and validation had passed."""
    original = error.original_error
    if isinstance(original, QueryError):
        return original.graphql_extensions()
    if isinstance(error, GraphQLSyntaxError):
        return {"code": "GRAPHQL_PARSE_FAILED"}
    if not executed:
        return {"code": "GRAPHQL_VALIDATION_FAILED"}
    if error.path is None and (original is None or isinstance(original, GraphQLError)):
        # failed outside any field after validation: coercing the variables' values
        return {"code": "BAD_USER_INPUT"}
    if isinstance(original, NodeError):
        return {"code": "INTERNAL_SERVER_ERROR", "reason": type(original).__name__}
    return {"code": "INTERNAL_SERVER_ERROR"}


def format_error(error: GraphQLError, executed: bool = True) -> dict[str, Any]:
    """The JSON of one GraphQL error, with `extensions.code` always set."""
    formatted: dict[str, Any] = {"message": error.message}
    if error.locations:
        formatted["locations"] = [{"line": x.line, "column": x.column} for x in error.locations]
    if error.path:
        formatted["path"] = error.path
    formatted["extensions"] = error_extensions(error, executed)
    return formatted


@dataclass(frozen=True)
class _Request:
    query: str
    variables: dict[str, Any] | None
    operation_name: str | None
    roles: tuple[Role, ...]
    applied_at_least: AppliedAtLeast | None


def _parse_request(body: bytes) -> _Request:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedRequestError(f"request body is not JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise MalformedRequestError("request body must be a JSON object")
    query, variables = request.get("query"), request.get("variables")
    operation_name = request.get("operationName")
    if not isinstance(query, str) or not query.strip():
        raise MalformedRequestError('request has no "query" string')
    if variables is not None and not isinstance(variables, dict):
        raise MalformedRequestError('"variables" must be a JSON object')
    if operation_name is not None and not isinstance(operation_name, str):
        raise MalformedRequestError('"operationName" must be a string')
    extensions = request.get("extensions")
    return _Request(
        query,
        variables,
        operation_name,
        _roles(extensions),
        parse_applied_at_least(extensions),
    )


def _roles(extensions: Any) -> tuple[Role, ...]:
    """The copies a request may read: STANDBY ones only when it asks (`readStandby`)."""
    if extensions is None:
        return _ACTIVE_ONLY
    standby = extensions.get(READ_STANDBY, False) if isinstance(extensions, dict) else None
    if not isinstance(standby, bool):
        raise MalformedRequestError(f'"extensions" must be a JSON object, {READ_STANDBY} a bool')
    return (Role.ACTIVE, Role.STANDBY) if standby else _ACTIVE_ONLY


@dataclass(frozen=True)
class _Prepared:
    """A query text parsed (or its syntax error) and validated against the subgraph."""

    document: DocumentNode | None
    errors: list[GraphQLError]


def _operation_name(document: DocumentNode, requested: str | None) -> str | None:
    """The operation to run, picked as strawberry picks it (the requested one, else the
    first); MalformedRequestError worded as strawberry's when there is none or it is no
    query."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if requested is None:
        chosen = operations[0] if operations else None
    else:
        chosen = next((o for o in operations if o.name and o.name.value == requested), None)
    if chosen is None:
        raise MalformedRequestError(CannotGetOperationTypeError(requested).as_http_error_reason())
    kind = OperationType(chosen.operation.value)
    if kind not in _QUERIES_ONLY:
        raise MalformedRequestError(InvalidOperationTypeError(kind).as_http_error_reason("POST"))
    return None if chosen.name is None else chosen.name.value


class GraphQLEndpoint:
    """ASGI handler of `POST /graphql` over a subgraph schema and this node's partitions."""

    def __init__(
        self, schema: strawberry.Schema, registry: PartitionRegistry, clock: Clock = wall_clock_ms
    ):
        self.schema = schema
        self.registry = registry
        self.clock = clock
        # the gateway sends a handful of documents with variables: parse and validate each
        # once (validation is ~90% of a small request's GraphQL cost)
        self._prepare = functools.lru_cache(maxsize=_DOCUMENT_CACHE_SIZE)(self._parse_and_validate)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            error = MalformedRequestError("use POST with a JSON body")
            await send_json(send, 405, self._refused(error), [(b"allow", b"POST")])
            return
        try:
            body = await read_body(receive, MAX_BODY_BYTES)
            request = _parse_request(body)
        except MalformedRequestError as exc:
            await send_json(send, 400, self._refused(exc))
            return
        if request.applied_at_least is not None:
            try:
                await wait_applied(self.registry, request.applied_at_least, request.roles)
            except NotCaughtUpError as exc:
                await send_json(send, 200, self._refused(exc))
                return
        answer = self.execute(
            request.query, request.variables, request.operation_name, request.roles
        )
        await send_json(send, 200, answer)

    def execute(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        operation_name: str | None = None,
        roles: tuple[Role, ...] = _ACTIVE_ONLY,
    ) -> dict[str, Any]:
        """Run one GraphQL request reading copies in `roles`; the response, freshness included."""
        context = ReadContext(self.registry, self.clock, roles=roles)
        if not query:
            return self._refused(MalformedRequestError(str(MissingQueryError())))
        prepared = self._prepare(query)
        if prepared.document is None:
            return self._response(context, None, prepared.errors)
        try:
            name = _operation_name(prepared.document, operation_name)
        except MalformedRequestError as exc:
            return self._refused(exc)
        if prepared.errors:
            return self._response(context, None, prepared.errors)
        context.executed = True
        try:
            result = execute_sync(
                self.schema._schema,
                prepared.document,
                context_value=context,
                variable_values=variables,
                operation_name=name,
                executor_class=self.schema.execution_context_class,
            )
        except Exception as exc:  # as strawberry's execute: an answer, not a crash
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            result = ExecutionResult(None, [error])
        if result.errors:
            self.schema.process_errors(result.errors)
        return self._response(context, result.data, result.errors)

    def _response(
        self, context: ReadContext, data: Any, errors: list[GraphQLError] | None
    ) -> dict[str, Any]:
        response: dict[str, Any] = {}
        if context.executed:
            response["data"] = data
        if errors:
            response["errors"] = [format_error(e, context.executed) for e in errors]
        response["extensions"] = {"freshness": context.freshness_entries()}
        return response

    def _parse_and_validate(self, query: str) -> _Prepared:
        try:
            document = parse(query)
        except GraphQLError as error:
            return _Prepared(None, [error])
        return _Prepared(document, validate(self.schema._schema, document))

    def _refused(self, exc: QueryError) -> dict[str, Any]:
        error = GraphQLError(str(exc), original_error=exc)
        return {"errors": [format_error(error)], "extensions": {"freshness": []}}
