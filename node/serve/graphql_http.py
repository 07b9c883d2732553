"""The node's GraphQL endpoint: the shared GraphQL-over-HTTP layer (`runtime.graphql_http`)
over the subgraph, executed synchronously with graphql-core (the resolvers are LevelDB reads
that take microseconds).

An executed answer carries `extensions.freshness`: one entry per partition the request
read. Only ACTIVE copies are read unless the request's `extensions` say
`{"readStandby": true}`; `{"appliedAtLeast": ...}` makes the request wait until the copies
read have applied given changelog offsets (node.reads.catchup), or refuses it with
NOT_CAUGHT_UP; `{"readCurrent": ...}` makes it wait until the copies are proved current
(node.reads.currency, with the `probe` the node app sets), or refuses it with NOT_OWNER.
The gateway's lookups (`_entities` of a batch of keys) are answered without graphql-core
(node.subgraph.fastlookups) unless STATEFED_NODE_FAST_LOOKUPS is off; anything unusual in one is
executed as any document. `error_extensions` is the one place where the node's exceptions
become GraphQL error codes.

Every caller gets the node's query limits before the document is validated or run
(`runtime.graphql_http.limits`, set in `node.config`): depth, aliases per spread,
tokens, body size, introspection, and a cost: a root field's `first`, `limit` and key lists
(not `partitions`: a node has no fan-out) multiplied, times the weight of what it selects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import strawberry
from graphql import (
    ExecutionResult,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    OperationDefinitionNode,
    execute_sync,
)

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import MalformedRequestError, NotCaughtUpError, NotCurrentError, QueryError
from node.reads.catchup import parse_applied_at_least, wait_applied
from node.reads.currency import parse_read_current, prove_current
from node.reads.endprobe import EndProbe
from node.subgraph.fastlookups import FastLookups, Lookup
from node.subgraph.schema import ReadContext, entities_of
from runtime.clock import Clock, wall_clock_ms
from runtime.graphql_http import (
    GraphQLHTTP,
    GraphQLRequest,
    Outcome,
    Prepared,
    RequestError,
)
from runtime.graphql_http.limits import Limits, Measure, Size, measure, weigh
from schema import READ_STANDBY, Role

__all__ = ["GraphQLEndpoint"]

_SIZED = frozenset({"first", "limit"})  # Int arguments that size a field's answer
_UNPRICED = frozenset({"partitions"})  # list arguments that size no answer (no fan-out)
_SHAPES_PER_DOCUMENT = 16  # operation names whose shape is kept with a document
_HOW = "a field costs its `first`, `limit` or number of keys"
# without READ_STANDBY in the request extensions (the gateway falling back), a read is
# answered from ACTIVE copies only
_ACTIVE_ONLY = (Role.ACTIVE,)
_ANY_COPY = (Role.ACTIVE, Role.STANDBY)
_LOOKUP = object()  # the key of a document's `Lookup` (or None) in `Prepared.memo`


def _roles(extensions: dict[str, Any] | None) -> tuple[Role, ...]:
    """The copies a request may read: STANDBY ones only when it asks (`readStandby`)."""
    if extensions is None:
        return _ACTIVE_ONLY
    standby = extensions.get(READ_STANDBY, False)
    if not isinstance(standby, bool):
        raise RequestError(f'"extensions.{READ_STANDBY}" must be a bool, got {standby!r}')
    return _ANY_COPY if standby else _ACTIVE_ONLY


_Term = tuple[str, tuple[Size, ...], int | None]  # response key, sizes, weight


@dataclass(frozen=True)
class _Shape:
    """One operation's measure, and per root response key its sizes and weight; whether a
    limit of depth, aliases or introspection refuses it, and whether every root field has
    a weight (else its cost cannot be priced): both settled once per cached document."""

    measure: Measure
    terms: tuple[_Term, ...]
    refused: bool
    priced: bool

    def costs(self, variables: Mapping[str, Any] | None) -> list[tuple[str, int]]:
        costs = []
        for label, sizes, weight in self.terms:
            cost = weight or 1
            for size in sizes:
                cost *= max(size.of(variables), 1)
            costs.append((label, cost))
        return costs


class GraphQLEndpoint(GraphQLHTTP[ReadContext]):
    """ASGI handler of `/graphql` over a subgraph schema and this node's partitions, with
    the query limits of `config` (its defaults when None)."""

    def __init__(
        self,
        schema: strawberry.Schema,
        registry: PartitionRegistry,
        clock: Clock = wall_clock_ms,
        config: NodeConfig | None = None,
    ):
        config = config or NodeConfig()
        env = NodeConfig.ENV
        super().__init__(
            schema._schema,
            config.max_body_bytes,
            env["max_body_bytes"],
            config.max_tokens,
            env["max_tokens"],
            config.normalize_literals,
        )
        self.schema = schema
        self.registry = registry
        self.clock = clock
        self.limits = Limits.of(config, env, "node")
        self._sized = _sized_arguments(schema._schema)
        self.fast_lookups = (
            FastLookups(schema._schema, entities_of(schema)) if config.fast_lookups else None
        )
        self.fast_answered = 0  # lookups answered without execution
        # learns changelog end offsets for `readCurrent`; set once the node runs
        self.probe: EndProbe | None = None

    def context(self, request: GraphQLRequest) -> ReadContext:
        return ReadContext(self.registry, self.clock, roles=_roles(request.extensions))

    def refuse(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: ReadContext,
    ) -> Sequence[GraphQLError]:
        shape = self._shape(prepared, operation)
        refused = self.limits.refusals(shape.measure) if shape.refused else []
        if shape.measure.depth > self.limits.max_depth:
            return refused  # not weighed
        costs = shape.costs(request.variables)
        total = sum(c for _, c in costs) if shape.priced else None
        too_costly = self.limits.too_costly(total, costs, _HOW)
        return refused if too_costly is None else [*refused, too_costly]

    def _shape(self, prepared: Prepared, operation: OperationDefinitionNode) -> _Shape:
        """The limits' shape of one operation, measured once per cached document."""
        name = None if operation.name is None else operation.name.value
        shape = prepared.memo.get(name)
        if shape is None:
            assert prepared.document is not None
            measured = measure(prepared.document, operation)
            terms: tuple[_Term, ...] = ()
            if not measured.too_nested and measured.depth <= self.limits.max_depth:
                terms = tuple(
                    self._term(key, nodes, measured) for key, nodes in measured.roots.items()
                )
            refused = bool(self.limits.refusals(measured))
            priced = all(weight is not None for _, _, weight in terms)
            shape = _Shape(measured, terms, refused, priced)
            if len(prepared.memo) < _SHAPES_PER_DOCUMENT:  # operation names come from clients
                prepared.memo[name] = shape
        return cast(_Shape, shape)

    def _term(self, key: str, nodes: tuple[Any, ...], measured: Measure) -> _Term:
        node = nodes[0]
        sizes = tuple(
            size
            for argument, default in self._sized.get(node.name.value, ())
            if (size := Size.argument(node, argument, default, measured.defaults)) is not None
        )
        return key, sizes, weigh(nodes, measured.fragments)

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
                current = parse_read_current(request.extensions)
                if current is not None:
                    context.proved = await prove_current(
                        self.registry, self.probe, current, context.roles
                    )
            except MalformedRequestError as exc:
                raise RequestError(str(exc)) from exc
            except (NotCaughtUpError, NotCurrentError) as exc:
                return Outcome.refused([GraphQLError(str(exc), original_error=exc)])
        lookup = self._lookup(prepared)
        if lookup is not None:
            data = lookup.answer(request.variables, context)
            if data is not None:
                self.fast_answered += 1
                context.executed = True
                return Outcome(data, None)
            context.forget_reads()  # execution reads anew, and reports what it read
        return self._run(prepared, operation, request.variables, context)

    def _lookup(self, prepared: Prepared) -> Lookup | None:
        """The gateway's lookup `prepared` is (node.subgraph.fastlookups), recognized once per
        cached document; None for any other document or with fast lookups off."""
        if self.fast_lookups is None:
            return None
        lookup = prepared.memo.get(_LOOKUP, _LOOKUP)
        if lookup is _LOOKUP:
            assert prepared.document is not None
            lookup = prepared.memo[_LOOKUP] = self.fast_lookups.recognize(prepared.document)
        return cast(Lookup | None, lookup)

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


def _sized_arguments(schema: GraphQLSchema) -> dict[str, tuple[tuple[str, Any], ...]]:
    """Per root field, the arguments that size its answer and their defaults: `first`,
    `limit` and lists of keys or representations."""
    query = schema.query_type
    sized: dict[str, tuple[tuple[str, Any], ...]] = {}
    for name, field in (query.fields if query is not None else {}).items():
        arguments = []
        for argument, spec in field.args.items():
            kind = spec.type.of_type if isinstance(spec.type, GraphQLNonNull) else spec.type
            is_list = isinstance(kind, GraphQLList)
            if argument in _SIZED or (is_list and argument not in _UNPRICED):
                default = spec.default_value if isinstance(spec.default_value, int) else None
                arguments.append((argument, default))
        if arguments:
            sized[name] = tuple(arguments)
    return sized
