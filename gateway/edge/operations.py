"""One GraphQL operation of a subscription transport, run the way `/graphql` runs a request.

Both transports (`gateway.edge.ws`, `gateway.edge.sse`) hand every operation to `Operations`:
the query text goes through the endpoint's document cache (parsed once, at most
STATEFED_GATEWAY_MAX_TOKENS tokens), the operation is picked, the request gets the endpoint's
context for the transport's principal, the endpoint's query limits (`refuse`) run before the
document is validated, and a query or mutation runs through the endpoint's own `run`. A
subscription runs graphql-core's subscribe steps on the same schema and becomes a `Stream` of
response bodies, after it has taken a slot (`gateway.edge.slots`): each event is written by
the operation's compiled writer (`gateway.execute.writer`) where it has one, else executed as
graphql-core's `subscribe` executes it. A subscription authorized by a token with an
expiry ends when that token stops verifying (`Principal.expires_at`), with one UNAUTHENTICATED
error: one timer per subscription, nothing per event. Every error is formatted as `/graphql`
formats it: `extensions.code`, server faults masked and logged under the operation's id.

The transports only speak their protocol; what they need of the server is this module's
`Operations`, built over any `GraphQLHTTP` endpoint and the strawberry schema it serves (the
gateway's, or a test's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from inspect import isawaitable
from typing import Any

import strawberry
from graphql import (
    ExecutionResult,
    Executor,
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    create_source_event_stream,
    execute_subscription_event,
    map_source_to_response_event,
)
from graphql.execution.executor_throwing_on_incremental import ExecutorThrowingOnIncremental
from graphql.pyutils import AwaitableOrValue

from gateway.auth.bearer import SUBSCRIPTION_EXPIRED, UNAUTHENTICATED
from gateway.edge.slots import Slot, Slots
from gateway.execute.writer import EventCounts, EventWriter, event_writer
from gateway.model.principal import Principal
from runtime.graphql_http import GraphQLHTTP, GraphQLRequest, Prepared, RequestError
from runtime.graphql_http.request import request_id
from runtime.graphql_http.response import PARSE_FAILED, VALIDATION_FAILED, format_errors

__all__ = ["Operations", "Refused", "Single", "Started", "Stream", "request_refusal"]

_UNSEEN = object()
# a Unix second beyond any token's life (year 33658): a larger `exp` is taken as this one
_FAR_FUTURE_S = 10**12

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refused:
    """The operation did not run: `errors` (formatted) say why. A transport sends them as
    its protocol's pre-execution error."""

    errors: list[dict[str, Any]]


@dataclass(frozen=True)
class Single:
    """A query or mutation: its one response body."""

    body: dict[str, Any]


class Stream:
    """A running subscription: its response bodies, one per event, until the source ends or
    (`pump`) its token expires. `aclose` stops the source (the resolver's generator runs its
    `finally`) and frees the slot; a transport calls it whichever way the stream ends."""

    def __init__(
        self, source: AsyncIterator[ExecutionResult], slot: Slot, operations: Operations
    ) -> None:
        self._source = source
        self._slot = slot
        self._operations = operations
        self.request_id = ""
        self.expires_at: int | None = None  # of the principal's token (wall-clock second)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._bodies()

    async def _bodies(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for result in self._source:
                yield self._operations.body(result, self.request_id)
        except Exception as exc:  # a resolver failed mid-stream: its last message says why
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            yield {"errors": self._operations.format([error], self.request_id)}

    async def pump(self, emit: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """`emit` each body until the source ends, or until the token expires: then the
        source is stopped and one UNAUTHENTICATED error body is the last."""
        timeout = asyncio.timeout_at(self._deadline())  # one timer (loop.call_at), or none
        try:
            async with timeout:
                async for body in self:
                    await emit(body)
        except TimeoutError:
            if not timeout.expired():
                raise
            await self.aclose()  # now: the error may wait for a slow reader
            error = GraphQLError(SUBSCRIPTION_EXPIRED)
            await emit(
                {"errors": self._operations.format([error], self.request_id, UNAUTHENTICATED)}
            )

    def _deadline(self) -> float | None:
        """The loop time at which the token expires, None when it does not: its wall-clock
        second (PyJWT's clock, `gateway.auth.bearer`) taken onto the loop's clock once."""
        if self.expires_at is None:
            return None
        expires_at = min(self.expires_at, _FAR_FUTURE_S)  # PyJWT takes an `exp` of any size
        return asyncio.get_running_loop().time() + (expires_at - time.time())

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._source, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            self._slot.release()


Started = Refused | Single | Stream


class Operations:
    """Runs operations of `endpoint` (over `schema`) for the transports; subscriptions take a
    slot of `slots` each."""

    def __init__(self, endpoint: GraphQLHTTP[Any], schema: strawberry.Schema, slots: Slots) -> None:
        self._endpoint = endpoint
        self._schema = schema
        self.slots = slots
        self.events = EventCounts()  # of every subscription, written or executed

    async def start(
        self, request: GraphQLRequest, principal: Principal, connection: Slots.Connection
    ) -> Started:
        """Prepare, check and run `request` for `principal` on `connection`; RequestError
        when the request itself is wrong (no operation of that name, a mutation sent by GET,
        or the server is not started)."""
        request.caller = principal
        if not request.request_id:
            request.request_id = request_id(None)
        rid = request.request_id
        endpoint = self._endpoint
        endpoint.resolve(request)  # persisted queries and trusted documents, as over HTTP
        prepared = endpoint.documents.prepare(request.query)
        if prepared.document is None:
            return Refused(self.format(prepared.errors, rid, PARSE_FAILED))
        operation = prepared.operation(request.operation_name)
        if operation.operation is OperationType.MUTATION and request.method == "GET":
            raise RequestError(
                "mutations are only accepted by POST with a JSON body",
                405,
                "METHOD_NOT_ALLOWED",
                ((b"allow", b"POST"),),
            )
        context = endpoint.context(request)
        refused = endpoint.refuse(prepared, operation, request, context)
        if refused:
            return Refused(self.format(refused, rid))
        invalid = endpoint.documents.validate(prepared)
        if invalid:
            return Refused(self.format(invalid, rid, VALIDATION_FAILED))
        if operation.operation is not OperationType.SUBSCRIPTION:
            outcome = await endpoint.run(prepared, operation, request, context)
            body: dict[str, Any] = {}
            if outcome.errors:
                body["errors"] = self.format(outcome.errors, rid)
            if not outcome.executed:
                return Refused(body.get("errors", []))
            body["data"] = outcome.data
            endpoint.finish(body, context)
            return Single(body)
        slot = self.slots.take(connection)  # raises TooManySubscriptions
        try:
            source = await self._subscribe(prepared, operation, request, context)
        except BaseException:
            slot.release()
            raise
        if isinstance(source, ExecutionResult):  # refused before its stream began
            slot.release()
            return Refused(self.format(source.errors or (), rid))
        stream = Stream(source, slot, self)
        stream.request_id = rid
        stream.expires_at = principal.expires_at
        return stream

    async def _subscribe(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: Any,
    ) -> AsyncIterator[ExecutionResult] | ExecutionResult:
        """graphql-core's subscribe, its steps composed here so that each event is written
        by the operation's compiled writer (`gateway.execute.writer`) when it has one."""
        executor_class = self._schema.execution_context_class or ExecutorThrowingOnIncremental
        executor = executor_class.build(
            self._schema._schema,
            prepared.document,  # type: ignore[arg-type]  # not None: parsed above
            None,
            context,
            request.variables,
            None if operation.name is None else operation.name.value,
        )
        if isinstance(executor, list):  # the variables do not coerce
            return ExecutionResult(None, errors=executor)
        created = create_source_event_stream(executor)
        events = await created if isawaitable(created) else created
        if isinstance(events, ExecutionResult):
            return events
        writer = self._writer(prepared, operation)
        if writer is None:
            return map_source_to_response_event(executor, events, self._executed)
        return _written(executor, events, writer)

    def _executed(self, executor: Executor) -> AwaitableOrValue[ExecutionResult]:
        """An event of an operation without a writer, executed."""
        self.events.executed += 1
        return execute_subscription_event(executor)

    def _writer(self, prepared: Prepared, operation: OperationDefinitionNode) -> EventWriter | None:
        """The operation's event writer, compiled once per document and operation."""
        ident = ("events", None if operation.name is None else operation.name.value)
        writer = prepared.memo.get(ident, _UNSEEN)
        if writer is _UNSEEN:
            document = prepared.document
            assert document is not None
            fragments = [d for d in document.definitions if isinstance(d, FragmentDefinitionNode)]
            writer = event_writer(self._schema._schema, operation, fragments, self.events)
            prepared.memo[ident] = writer
        return writer  # type: ignore[no-any-return]

    def body(self, result: ExecutionResult, rid: str) -> dict[str, Any]:
        """The response body of one event of a subscription."""
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = self.format(result.errors, rid)
        return body

    def format(
        self, errors: Sequence[GraphQLError], rid: str, code: str | None = None
    ) -> list[dict[str, Any]]:
        return format_errors(errors, self._endpoint.error_extensions, code, rid)


async def _written(
    executor: Executor, events: AsyncIterable[Any], writer: EventWriter
) -> AsyncIterator[ExecutionResult]:
    """The responses of a subscription's events, each written by `writer` (executed when it
    is in doubt): graphql-core's `map_source_to_response_event` without its copy of the
    executor for every event. Closing it closes the source (the resolver's `finally`)."""
    source = aiter(events)
    try:
        async for event in source:
            result = writer(executor, event)
            yield await result if isawaitable(result) else result
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


def request_refusal(exc: RequestError) -> list[dict[str, Any]]:
    """The errors of a request refused before GraphQL ran (as `/graphql` words them)."""
    errors: list[dict[str, Any]] = exc.body()["errors"]
    return errors
