"""The node's GraphQL endpoint: the shared GraphQL-over-HTTP layer (`runtime.graphql_http`)
over the subgraph, executed synchronously with graphql-core (the resolvers are LevelDB reads
that take microseconds).

An executed answer carries `extensions.freshness`: one entry per partition the request
read. Only ACTIVE copies are read unless the request's `extensions` say
`{"readStandby": true}`; `{"appliedAtLeast": ...}` makes the request wait until the copies
read have applied given changelog offsets (node.catchup), or refuses it with
NOT_CAUGHT_UP. `error_extensions` is the one place where the node's exceptions become
GraphQL error codes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import strawberry
from graphql import ExecutionResult, GraphQLError, OperationDefinitionNode, execute_sync

from node.catchup import parse_applied_at_least, wait_applied
from node.errors import MalformedRequestError, NotCaughtUpError, QueryError
from node.partitions import PartitionRegistry
from node.subgraph import ReadContext
from runtime.clock import Clock, wall_clock_ms
from runtime.graphql_http import (
    GraphQLHTTP,
    GraphQLRequest,
    Outcome,
    Prepared,
    RequestError,
)
from schema import READ_STANDBY, Role

__all__ = ["MAX_BODY_BYTES", "GraphQLEndpoint"]

MAX_BODY_BYTES = 1 << 20  # of a POST body; a GET query string stays within the parser's cap
# without READ_STANDBY in the request extensions (the gateway falling back), a read is
# answered from ACTIVE copies only
_ACTIVE_ONLY = (Role.ACTIVE,)
_ANY_COPY = (Role.ACTIVE, Role.STANDBY)


def _roles(extensions: dict[str, Any] | None) -> tuple[Role, ...]:
    """The copies a request may read: STANDBY ones only when it asks (`readStandby`)."""
    if extensions is None:
        return _ACTIVE_ONLY
    standby = extensions.get(READ_STANDBY, False)
    if not isinstance(standby, bool):
        raise RequestError(f'"extensions.{READ_STANDBY}" must be a bool, got {standby!r}')
    return _ANY_COPY if standby else _ACTIVE_ONLY


class GraphQLEndpoint(GraphQLHTTP[ReadContext]):
    """ASGI handler of `/graphql` over a subgraph schema and this node's partitions."""

    def __init__(
        self, schema: strawberry.Schema, registry: PartitionRegistry, clock: Clock = wall_clock_ms
    ):
        super().__init__(schema._schema, MAX_BODY_BYTES)
        self.schema = schema
        self.registry = registry
        self.clock = clock

    def context(self, request: GraphQLRequest) -> ReadContext:
        return ReadContext(self.registry, self.clock, roles=_roles(request.extensions))

    async def run(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: ReadContext,
    ) -> Outcome:
        if request.extensions is not None:
            try:
                wanted = parse_applied_at_least(request.extensions)
                if wanted is not None:
                    await wait_applied(self.registry, wanted, context.roles)
            except MalformedRequestError as exc:
                raise RequestError(str(exc)) from exc
            except NotCaughtUpError as exc:
                return Outcome.refused([GraphQLError(str(exc), original_error=exc)])
        return self._run(prepared, operation, request.variables, context)

    def _run(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
        context: ReadContext,
    ) -> Outcome:
        assert prepared.document is not None
        context.executed = True
        try:
            result = execute_sync(
                self.schema._schema,
                prepared.document,
                context_value=context,
                variable_values=variables,
                operation_name=None if operation.name is None else operation.name.value,
                executor_class=self.schema.execution_context_class,
            )
        except Exception as exc:  # as strawberry's execute: an answer, not a crash
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            result = ExecutionResult(None, [error])
        return Outcome.of(result)

    def error_extensions(self, original: Exception) -> dict[str, Any] | None:
        # anything else (a StoreError too) is a fault: "internal error", logged with its id
        if isinstance(original, QueryError):
            return original.graphql_extensions()
        return None

    def finish(self, body: dict[str, Any], context: ReadContext) -> None:
        body["extensions"] = {"freshness": context.freshness_entries()}

    def execute(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        operation_name: str | None = None,
        roles: tuple[Role, ...] = _ACTIVE_ONLY,
    ) -> dict[str, Any]:
        """The `application/json` body answering one query read from copies in `roles`, for
        callers outside an event loop (tests, tools)."""
        extensions = {READ_STANDBY: True} if Role.STANDBY in roles else None
        try:
            request = GraphQLRequest(query, variables, operation_name, extensions)
            return asyncio.run(self.answer(request))[1]
        except RequestError as exc:
            return exc.body()
