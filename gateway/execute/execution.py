"""The gateway's GraphQL endpoint: the shared GraphQL-over-HTTP layer
(`runtime.graphql_http`) over the public schema, executed with graphql-core directly.

Each distinct query text is parsed (at most STATEFED_GATEWAY_MAX_TOKENS tokens) and
validated once by the shared document cache; the shape the query limits measure is kept
with the cached document (per operation name), so a request only evaluates its cost against
its variables (`refuse`; nothing when no variable can change it) before any node is asked;
the limits run before validation, which only a document within them gets. Strawberry builds
the schema; its `execute`, with per-request extension and middleware objects, is off the
hot path. Who is asking is settled before any of that, from the headers (`admit`,
`gateway.auth.bearer`): a request without a usable token is a 401 whose body was never read. A
GET without `query` or `extensions` shows GraphiQL. A request may name its document by hash
instead (`gateway.execute.persisted`: APQ, trusted documents). A query of lookups is answered
without execution, all of the above done: from the gateway cache when it holds every key,
else from the planner's reads, as the lookup resolvers read them (`gateway.execute.fastpath`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeGuard, cast

import strawberry
from graphql import (
    ExecutionResult,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    execute,
)
from strawberry.execution import optimized_is_awaitable

from gateway.api.request import RequestContext
from gateway.api.responses import format_missing, gateway_extensions, in_answer_order
from gateway.auth.bearer import Anonymous, Authenticator, Unauthenticated, authorization, refusal
from gateway.cluster.routing import RoutingTable
from gateway.execute.fastpath import FastPath
from gateway.execute.labels import OperationLabels
from gateway.execute.limits import QueryLimits, Shape
from gateway.execute.persisted import PersistedQueries
from gateway.execute.replay import Replay
from gateway.metrics import GatewayMetrics
from gateway.model.principal import ANONYMOUS, Principal
from runtime.graphql_http import (
    Answer,
    GraphQLHTTP,
    GraphQLRequest,
    MediaType,
    Outcome,
    Prepared,
    RequestError,
    Scope,
    Send,
    send_page,
)
from runtime.tracing import Span
from schema import View

__all__ = ["GatewayEndpoint"]

_SHAPES_PER_DOCUMENT = 16  # operation names whose shape is kept with a document
_UNMEASURED = object()
_STREAMS_ONLY = (
    "a subscription's updates cannot come in one JSON answer: subscribe over a WebSocket "
    "(graphql-transport-ws) or GraphQL over SSE (Accept: text/event-stream)"
)
# strawberry's faster check of resolver results (a bool function, typed as graphql-core wants)
_IS_AWAITABLE = cast(Callable[[Any], TypeGuard[Awaitable[Any]]], optimized_is_awaitable)


class GatewayEndpoint(GraphQLHTTP[RequestContext]):
    """`/graphql` of the gateway: `authenticator` says who each request is from (401 when
    it cannot), `contexts` builds each request's context for that principal (RequestError
    503 before start-up), `page` is the GraphiQL page a GET without a query gets; lookups
    of `catalogue`'s views are answered without execution when they can be
    (`gateway.execute.fastpath`)."""

    def __init__(
        self,
        schema: strawberry.Schema,
        limits: QueryLimits,
        authenticator: Authenticator,
        contexts: Callable[[Principal], RequestContext],
        page: bytes,
        max_body_bytes: int,
        max_tokens: int,
        metrics: GatewayMetrics | None = None,
        catalogue: Iterable[View] = (),
        persisted: PersistedQueries | None = None,
        normalize_literals: bool = True,
    ) -> None:
        super().__init__(
            schema._schema,
            max_body_bytes,
            "STATEFED_GATEWAY_MAX_BODY_BYTES",
            max_tokens,
            "STATEFED_GATEWAY_MAX_TOKENS",
            normalize_literals,
        )
        self._schema = schema
        self._limits = limits
        self._authenticator = authenticator
        self._anonymous = isinstance(authenticator, Anonymous)  # no header to look for
        self._contexts = contexts
        self._page = page
        self._metrics = metrics
        self._labels = OperationLabels(schema._schema)
        # lookups answered without execution (from the cache or the planner's reads); None:
        # every operation is executed (tests compare the two)
        self.fast_path: FastPath | None = FastPath(schema, catalogue)
        # APQ and trusted documents (`gateway.execute.persisted`); None: neither
        self._persisted = persisted

    async def admit(self, scope: Scope) -> Principal:
        if self._anonymous:
            return ANONYMOUS
        try:
            return await self._authenticator.principal(authorization(scope["headers"]))
        except Unauthenticated as exc:
            raise refusal(exc) from None

    def resolve(self, request: GraphQLRequest) -> None:
        if self._persisted is None:
            super().resolve(request)
        else:
            self._persisted.resolve(request)

    def context(self, request: GraphQLRequest) -> RequestContext:
        if not isinstance(request.caller, Principal):  # not admitted: refuse, never guess
            raise refusal(Unauthenticated(None))
        return self._contexts(request.caller)

    def refuse(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: RequestContext,
    ) -> Sequence[GraphQLError]:
        shape = self._shape(prepared, operation)
        if shape.settled:  # within the limits whatever the request (gateway.execute.limits)
            return ()
        table = context.feed.current
        return self._limits.check_shape(
            shape, request.variables, lambda view: _partitions(table, view)
        )

    async def run(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: RequestContext,
    ) -> Outcome:
        assert prepared.document is not None
        if operation.operation is OperationType.SUBSCRIPTION:  # the streams subscribe instead
            raise RequestError(_STREAMS_ONLY, 400)
        started = time.perf_counter()
        fast = self.fast_path
        if fast is not None:
            plan = fast.plan(prepared, operation, request.variables)
            data = None if plan is None else await fast.answer(plan, request.variables, context)
            if isinstance(data, Replay):  # read already: execution answers from those reads
                context.planner = data.planner(context.planner)
            elif data is not None:
                self._observe(operation, started)
                return Outcome(data, None)
        name = None if operation.name is None else operation.name.value
        try:
            with Span("plan"):
                outcome = execute(
                    self._schema._schema,
                    prepared.document,
                    context_value=context,
                    variable_values=request.variables,
                    operation_name=name,
                    is_awaitable=_IS_AWAITABLE,
                    executor_class=self._schema.execution_context_class,
                )
                result = outcome if isinstance(outcome, ExecutionResult) else await outcome
        except Exception as exc:  # as strawberry's execute: an answer, not a crash
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            result = ExecutionResult(None, [error])
        self._observe(operation, started)
        return Outcome.of(result)

    def _observe(self, operation: OperationDefinitionNode, started: float) -> None:
        """Count the operation in the request duration histogram (fast path or executed)."""
        if self._metrics is not None:
            self._metrics.executed(self._labels(operation), time.perf_counter() - started)

    async def answer(self, request: GraphQLRequest, media: MediaType = MediaType.JSON) -> Answer:
        """The base's answer, its errors counted by code in the metrics."""
        if self._metrics is None:
            return await super().answer(request, media)
        try:
            status, body = await super().answer(request, media)
        except RequestError as exc:
            self._metrics.refused(exc.code)
            raise
        if "errors" in body:
            self._metrics.errors(body["errors"])
        return status, body

    def _shape(self, prepared: Prepared, operation: OperationDefinitionNode) -> Shape:
        """The limits' shape of one operation, measured once per cached document."""
        name = None if operation.name is None else operation.name.value
        shape = prepared.memo.get(name, _UNMEASURED)
        if shape is _UNMEASURED:
            assert prepared.document is not None
            shape = self._limits.analyze(prepared.document, operation)
            if len(prepared.memo) < _SHAPES_PER_DOCUMENT:  # operation names come from clients
                prepared.memo[name] = shape
        return cast(Shape, shape)

    def error_extensions(self, original: Exception) -> dict[str, Any] | None:
        return gateway_extensions(original)

    def finish(self, body: dict[str, Any], context: RequestContext) -> None:
        if context.missing:
            errors = body.setdefault("errors", [])
            missing = in_answer_order(context.missing, body.get("data"))
            errors.extend(format_missing(m) for m in missing)
        body["extensions"] = context.extensions()

    async def without_query(self, scope: Scope, send: Send, media: MediaType | None) -> None:
        await send_page(send, self._page)


def _partitions(table: RoutingTable, view: View) -> int:
    """P of `view` for the cost of a fan-out; before metadata is read the read fails anyway."""
    return table.partition_counts.get(view.name) or table.max_partition_count() or 1
