"""The lookup fast path: a query of lookups answered from the gateway cache, or from the
planner's reads, without executing its document, when the answer is provably the one
execution gives.

Once per validated document and operation (kept with the cached document, bounded like
it), `FastPath.plan` derives a `Plan` when the operation is a query made only of point and
multi-key lookups of the views the cache holds (`gateway.reads.kinds.cacheable`: count,
latest and aggregate views), top-N (of count views, of aggregate views by any of their
numeric results, of one window of windowed views), the windows of one key of windowed
views, the `Totals` of count views and `__typename`, with arguments from literals or
variables, selecting plain scalar fields and `__typename`, aliases allowed, its fields
collected as graphql-core collects them (`gateway.execute.selections`: fragments on the very
type they select from spread in place, a leaf asked twice once); or of federation's
`_entities` alone, selecting `__typename` and fragments on the entity types of those views,
each of plain scalar fields (as routers ask it). `@skip` and `@include` are decided per request
(`gateway.execute.conditions`): an operation has a plan per outcome of its conditions, for
its first few outcomes. Fragments on an interface or a union, other directives, a condition
that is no boolean, any other field, one response key of two sub-selections: no plan, the
document is executed.

`_entities` is read as its resolver reads it (`gateway.api.fields.entities`): every
representation parsed and its view's scope checked (a doubt: execution reports it), then one
lookup per entity type, concurrently, through the cache; each item is the object of its
representation's type (null for an unknown key), and a partition that could not be read is
the resolver's own PARTITION_UNAVAILABLE error at the first of its representations.

A top-N is answered from the cache when every top-N of the request is kept there
(`GatewayCache.top`, the planner's own test of a kept top; only count views' are kept),
its freshness added before the lookups', as its resolver, answering from memory, adds it
before theirs complete. Otherwise (a top not kept, the cache off, a field accepting no lag)
each top-N is read as its resolver reads it (`Planner.top` with the same options and `by`:
from the cache if kept, else merged from every partition's top, which the cache may keep
for the next request), concurrently with the lookups, and a partition it could not read is
the resolver's PARTITION_UNAVAILABLE error with the field's path. The windows of a key and a
view's totals are read as their resolvers read them (`Planner.windows`, `Planner.totals`),
never from the cache.

Per request (`FastPath.answer`), after everything the endpoint does before it runs an operation
(CORS, authentication, the query limits, validation), the variables and arguments are bound as
graphql-core binds them (`gateway.execute.binding`), the lookups' own checks are made (the
principal's scope for the view, the keys, `maxLag`; an `atLeast` token is left to execution) and,
when the cache holds an entry of every key asked (`GatewayCache.holds`), every key is looked up in
it once (`GatewayCache.look`, the same test of currency as a lookup's). When the cache is off or
cannot answer every key, each root field's keys are read as its resolver reads them
(`Reads.lookup` with the same `ReadOptions`, concurrently, so the coalescer sends them as
execution's), from what the cache answered (`looked`: it is not asked again), and a partition
that could not be read becomes the same PARTITION_UNAVAILABLE error with the field's path,
recorded in the order the reads complete, as the resolvers record it. The rows become the objects
the lookup fields return (each view's entity type), whose leaves are read by the fields' own
resolvers and serialized by their own types; what a root field makes of a row depends on the row's
value alone, so it is kept for hashable rows (count rows; a latest view's events are made each time)
in one bounded memo. When anything is in doubt (a variable or argument that does not coerce, a check
that fails, a key the cache cannot answer now, a null or a value that does not serialize where the
type forbids it) `answer` returns None having changed nothing, and the document is executed: its
errors, node reads and cache bookkeeping are the full path's own. A doubt that arises only once the
nodes were read (a row that does not serialize, a read that raised) returns the reads made
(`Replay`): execution then gets exactly those results from the planner, never a second read, and
reports what it makes of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import count
from typing import Any, cast

import strawberry
from graphql import (
    FieldNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    OperationDefinitionNode,
    OperationType,
    Undefined,
)
from graphql.execution.values import VariableValues

from gateway.api.fields.common import Entity, authorize_view
from gateway.api.fields.entities import parse_representation, record_missing
from gateway.api.fields.keys import key_texts
from gateway.api.fields.totals import TOTALS_TYPE, totals_of
from gateway.api.request import RequestContext, per_key
from gateway.api.schema import entities_of, row_types_of
from gateway.cluster.routing import group_keys
from gateway.execute.binding import Arguments, Unbound, Variables
from gateway.execute.conditions import Conditional, conditional_nodes, decide
from gateway.execute.selections import (
    Decided,
    Fragments,
    collect,
    fragment_of,
    fragments_of,
    included,
    response_key,
)
from gateway.execute.writer import TYPENAME, reads_attribute
from gateway.model import inputs
from gateway.model.errors import GatewayError
from gateway.model.rows import Event, Row, WindowCount
from gateway.reads.kinds import cacheable
from gateway.reads.protocol import (
    DEFAULT_READ,
    CachedRow,
    CacheHits,
    KeyRead,
    LookupResult,
    ReadOptions,
    Reads,
    TopResult,
    TotalsResult,
)
from runtime.graphql_http import Prepared
from runtime.tracing import Span
from schema import View

__all__ = ["FastPath", "Plan", "Replay"]

_MEMO_ROWS = 16_384  # (root field, row) -> its leaves, kept until the memo is full
# (root field ident, key, count) -> the object execution makes of that count row
_Made = dict[tuple[int, str, int], dict[str, Any]]
_ROOTS = count()  # names a root field in the memo for as long as the process lives
_NO_PLAN = object()  # kept in a document's memo: an operation whose conditions are not plain
_PLANS_PER_OPERATION = 8  # outcomes of an operation's conditions with a plan kept
_ENTITIES = "_entities"


class _Doubt(Exception):
    """Execution must answer: the fast path cannot prove its answer equal."""


@dataclass(frozen=True, slots=True)
class _Leaf:
    """A selected field of a row's object: its resolver and serializer (none for
    `__typename`), and whether its type forbids null."""

    key: str  # the response key (alias or name)
    resolve: Callable[..., Any] | None
    serialize: Callable[[Any], Any] | None
    non_null: bool


@dataclass(frozen=True, slots=True)
class _Root:
    """A root field of the operation: a lookup of `view` (several keys when `many`), or
    the query type's `__typename` when `view` is None."""

    key: str
    view: View | None
    many: bool
    convert: Callable[[Any], Any] | None  # a row (or totals read) -> the field's object
    type_name: str  # of the object (of the query type for `__typename`)
    leaves: tuple[_Leaf, ...]
    nullable_rows: bool  # whether an unknown key may be answered null
    arguments: Arguments | None
    ident: int  # in the memo of made rows
    top: bool = False  # the top-N of `view`, not a lookup
    ranked: bool = False  # a top-N by a result the request chooses (`by`): an aggregate view's
    windowed: bool = False  # a top-N of one window (`window`): a windowed view's
    windows: bool = False  # the windows of one key (`from`, `to`): a windowed view's
    totals: bool = False  # the `Totals` of `view`'s keys, added up from every partition
    # federation's `_entities` (the plan's only root): a root per entity type the cache
    # holds, by type name, whose leaves are what the selection asks of that type
    entities: Mapping[str, _Root] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """How to answer one operation from the cache."""

    operation: OperationDefinitionNode
    roots: tuple[_Root, ...]
    variables: Variables


@dataclass(frozen=True, slots=True)
class _Operation:
    """What the memo keeps of one operation: the fragments of its document, its selection
    nodes that carry `@skip` or `@include`, and its plans by the outcome of those (None:
    that outcome has no plan), for its first `_PLANS_PER_OPERATION` outcomes."""

    fragments: Fragments
    nodes: tuple[Conditional, ...]
    plans: dict[tuple[bool, ...], Plan | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Lookup:
    view: View
    many: bool


class FastPath:
    """Plans and answers lookups of `catalogue`'s cached views over `schema` (the one
    `gateway.api.schema.build_schema` made for that catalogue)."""

    def __init__(self, schema: strawberry.Schema, catalogue: Iterable[View]) -> None:
        self._schema = schema._schema
        self._entities = entities_of(schema)
        self._row_types = row_types_of(schema)  # of windowed views, which have no entity
        self.answered = 0  # requests answered here
        self._made: _Made = {}  # see _object
        self._lookups: dict[str, _Lookup] = {}
        self._tops: dict[str, View] = {}  # the top-N fields: count, aggregate, windowed
        self._windows: dict[str, View] = {}  # the windows-of-a-key fields of windowed views
        self._totals: dict[str, View] = {}  # the fields of a view's `Totals`
        # the entity types whose views the cache holds, by type name: `_entities` of them
        self._cached_entities = {
            name: entity for name, entity in self._entities.items() if cacheable(entity.view)
        }
        query = self._schema.query_type
        fields = {} if query is None else query.fields
        for view in catalogue:
            if cacheable(view):
                self._lookups[view.point_field] = _Lookup(view, many=False)
                self._lookups[view.many_field] = _Lookup(view, many=True)
            if view.top_field in fields:  # `_view_root` takes those of the view's type
                self._tops[view.top_field] = view
            if view.type_name in self._row_types:  # its point field lists a key's windows
                self._windows[view.point_field] = view
            totals = fields.get(view.totals_field)
            if totals is not None and _totals_type(totals.type) is not None:
                self._totals[view.totals_field] = view

    # -- once per document ----------------------------------------------------------------

    def plan(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        variables: Mapping[str, Any] | None,
    ) -> Plan | None:
        """The plan of `operation` of a validated document for the outcome of its `@skip`
        and `@include` conditions with `variables`, derived once and kept with it."""
        ident = ("fastpath", None if operation.name is None else operation.name.value)
        found = prepared.memo.get(ident)
        if found is None:
            assert prepared.document is not None
            fragments = fragments_of(prepared.document.definitions)
            nodes = conditional_nodes(operation, fragments)
            found = _NO_PLAN if nodes is None else _Operation(fragments, nodes)
            prepared.memo[ident] = found  # one per operation the document defines
        if not isinstance(found, _Operation):
            return None
        outcomes = decide(found.nodes, operation, variables) if found.nodes else ()
        if outcomes is None:
            return None
        if outcomes not in found.plans:
            if len(found.plans) >= _PLANS_PER_OPERATION:
                return None  # outcomes past the first few are executed
            decided = {id(node): yes for node, yes in zip(found.nodes, outcomes, strict=True)}
            found.plans[outcomes] = self._derive(operation, found.fragments, decided)
        return found.plans[outcomes]

    def _derive(
        self, operation: OperationDefinitionNode, fragments: Fragments, decided: Decided
    ) -> Plan | None:
        query = self._schema.query_type
        if operation.operation is not OperationType.QUERY or operation.directives or not query:
            return None
        fields = collect(operation.selection_set.selections, fragments, query.name, decided)
        if fields is None:
            return None
        if not fields:
            return None  # every root field left out: execution answers `{}`
        roots = []
        for node in fields:
            root = self._root(node, fragments, decided)
            if root is None:
                return None
            roots.append(root)
        if len(roots) > 1 and any(root.entities is not None for root in roots):
            return None  # `_entities` is answered alone
        variables = Variables(self._schema, operation.variable_definitions or ())
        return Plan(operation, tuple(roots), variables)

    def _root(self, node: FieldNode, fragments: Fragments, decided: Decided) -> _Root | None:
        name = node.name.value
        query = self._schema.query_type
        if query is None:
            return None
        if name == TYPENAME:
            return _Root(
                response_key(node), None, False, None, query.name, (), True, None, next(_ROOTS)
            )
        if name == _ENTITIES:
            return self._entities_root(node, fragments, decided)
        if name in self._tops:  # a list of the view's entity type
            return self._view_root(node, fragments, decided, self._tops[name], many=True, top=True)
        if name in self._windows:
            return self._view_root(
                node, fragments, decided, self._windows[name], many=True, windows=True
            )
        if name in self._totals:
            return self._totals_root(node, fragments, decided, self._totals[name])
        lookup = self._lookups.get(name)
        if lookup is None:
            return None
        return self._view_root(node, fragments, decided, lookup.view, many=lookup.many, top=False)

    def _view_root(
        self,
        node: FieldNode,
        fragments: Fragments,
        decided: Decided,
        view: View,
        *,
        many: bool,
        top: bool = False,
        windows: bool = False,
    ) -> _Root | None:
        """The root of a field of `view` that returns its entity type, or its row type when
        it has none (a list when `many`): a lookup, a top-N (`top`) or a key's windows
        (`windows`); None when the schema's field is not of that shape or its selection is
        not plain."""
        query = self._schema.query_type
        assert query is not None
        field = query.fields.get(node.name.value)
        entity = self._entities.get(view.type_name) or self._row_types.get(view.type_name)
        if field is None or entity is None or node.selection_set is None:
            return None
        shape_many, nullable_rows, object_type = _shape(field.type)
        if shape_many != many or object_type is None:
            return None
        if object_type.name != view.type_name or object_type.is_type_of is not None:
            return None
        assert node.selection_set is not None
        leaves = _leaves(object_type, node.selection_set.selections, fragments, decided)
        if leaves is None:
            return None
        return _Root(
            response_key(node), view, many, entity.convert, object_type.name, leaves,
            nullable_rows, Arguments(field, node), next(_ROOTS), top, top and "by" in field.args,
            top and "window" in field.args, windows,
        )  # fmt: skip

    def _totals_root(
        self, node: FieldNode, fragments: Fragments, decided: Decided, view: View
    ) -> _Root | None:
        """The root of a view's totals field (a non-null `Totals`) selecting plain leaves."""
        query = self._schema.query_type
        assert query is not None
        field = query.fields[node.name.value]
        object_type = _totals_type(field.type)
        if node.selection_set is None or object_type is None:
            return None
        leaves = _leaves(object_type, node.selection_set.selections, fragments, decided)
        if leaves is None:
            return None
        return _Root(
            response_key(node), view, False, totals_of, object_type.name, leaves, False,
            Arguments(field, node), next(_ROOTS), totals=True,
        )  # fmt: skip

    def _entities_root(
        self, node: FieldNode, fragments: Fragments, decided: Decided
    ) -> _Root | None:
        """The root of `_entities` when its selection is `__typename` and fragments (inline
        or named) on entity types of views the cache holds, each of plain leaves (a type
        without a fragment answers `{}`, or its `__typename`)."""
        query = self._schema.query_type
        assert query is not None
        field = query.fields.get(_ENTITIES)
        if field is None or node.selection_set is None or node.arguments is None:
            return None
        selected: list[tuple[str | None, Any]] = []  # (type condition, selection) in order
        for selection in node.selection_set.selections:
            chosen = included(selection, decided)
            if chosen is None:
                return None  # a condition not decided
            if not chosen:
                continue
            if isinstance(selection, FieldNode) and selection.name.value == TYPENAME:
                selected.append((None, selection))
                continue
            fragment = fragment_of(selection, fragments)
            if fragment is None:
                return None
            condition = fragment.type_condition
            if condition is None or condition.name.value not in self._cached_entities:
                return None
            selected += [(condition.name.value, f) for f in fragment.selection_set.selections]
        per_type: dict[str, _Root] = {}
        for type_name, entity in self._cached_entities.items():
            object_type = self._schema.get_type(type_name)
            if not isinstance(object_type, GraphQLObjectType):
                return None
            mine = [f for condition, f in selected if condition in (None, type_name)]
            leaves = _leaves(object_type, mine, fragments, decided)
            if leaves is None:
                return None
            per_type[type_name] = _Root(
                response_key(node), entity.view, False, entity.convert, type_name, leaves, True,
                None, next(_ROOTS),
            )  # fmt: skip
        return _Root(
            response_key(node), None, True, None, query.name, (), True, Arguments(field, node),
            next(_ROOTS), entities=per_type,
        )  # fmt: skip

    # -- per request ----------------------------------------------------------------------

    async def answer(
        self, plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
    ) -> dict[str, Any] | Replay | None:
        """The `data` of `plan` for `variables`, from the cache when it answers every key,
        else from the planner's reads, with the freshness of the partitions read (and the
        partitions that could not be) added to `context`; None when execution must answer
        instead (nothing is then changed), a `Replay` of the reads made when execution must
        answer from them."""
        if plan.roots[0].entities is not None:  # alone in its plan
            return await self._entities_answer(plan, variables, context)
        try:
            asked = _asked(plan, variables, context)
        except (_Doubt, Unbound, GraphQLError, GatewayError, TypeError, ValueError):
            return None
        cache = context.cache
        if any(a.options.accepts_no_lag(context.config.max_lag) for a in asked):
            cache = None  # a read accepting no lag is proved by a node, never from memory
        kept = self._kept_tops(asked, cache, context)
        looked: Mapping[str, CacheHits] = {}
        if cache is not None and kept is not None and not any(_read_only(a.root) for a in asked):
            data, looked = self._hit(asked, cache, context, kept)
            if data is not None:
                self.answered += 1
                return data
        return await self._read(asked, context, looked, {} if kept is None else kept)

    def _hit(
        self, asked: list[_Asked], cache: Any, context: RequestContext, kept: _Kept
    ) -> tuple[Any, Mapping[str, CacheHits]]:
        """The data of `asked` (its top-N `kept` already) when the cache answers every key
        (counted as hits), else None having changed nothing, with what the cache answered
        of each view (by name): the reads of the rest start from it instead of asking the
        cache again."""
        for a in asked:  # a key not held: no look answers it whole; each read decides
            if a.root.view is not None and not a.root.top and not cache.holds(a.root.view, a.keys):
                return None, _NOT_LOOKED
        looked: dict[str, CacheHits] = {}
        try:
            wanted = _by_view(asked)
            for name, (view, keys) in wanted.items():
                looked[name] = cache.look(view, _keys_of(view, keys, context))
            if any(hits.missing for hits in looked.values()):
                return None, looked
            made = self._made
            data = {
                a.root.key: kept[id(a)][0] if a.root.top else _value(a.root, _rows(a, looked), made)
                for a in asked
            }
        except (_Doubt, GraphQLError, GatewayError, TypeError, ValueError):
            return None, looked
        _add_tops(kept, context)
        for name, (view, keys) in wanted.items():
            cache.took(view, keys)
            context.add_freshness(view, looked[name].freshness)
        return data, looked

    def _kept_tops(self, asked: list[_Asked], cache: Any, context: RequestContext) -> _Kept | None:
        """The value and freshness of each top-N of `asked` (by the id of its `_Asked`), all
        from tops the cache keeps (as `Planner.top` finds them); None when one is not kept
        (or there is no cache): each is then read as its resolver reads it."""
        kept: _Kept = {}
        for a in asked:
            root = a.root
            if not root.top:
                continue
            assert root.view is not None
            if cache is None or a.by is not None or a.window is not None:  # never kept
                return None
            partitions = context.feed.current.partition_count(root.view)
            found = cache.top(root.view, a.limit, partitions, a.options, counted=False)
            if found is None:
                return None
            try:
                value = [_object(root, row, self._made) for row in found.rows]
            except (_Doubt, GraphQLError, GatewayError, TypeError, ValueError):
                return None  # read, and counted, as its resolver reads it
            kept[id(a)] = (value, root.view, found.freshness)
        return kept

    async def _read(
        self,
        asked: list[_Asked],
        context: RequestContext,
        looked: Mapping[str, CacheHits],
        kept: _Kept,
    ) -> Any:
        """The data of `asked` (its top-N `kept` already, or none of them) read through the
        planner, as the resolvers of its fields read it, from what the cache answered of
        each view (`looked`, by view name) and the nodes."""
        reads = [a for a in asked if a.root.view is not None and id(a) not in kept]
        done: list[int] = []  # the reads in the order they completed
        results: list[_Result] = [_NOT_READ] * len(reads)

        async def read(index: int) -> None:
            one = reads[index]
            try:
                if one.root.top:
                    results[index] = await _top(one, context)
                elif one.root.windows:
                    results[index] = await _windows(one, context)
                elif one.root.totals:
                    results[index] = await _totals(one, context)
                else:
                    results[index] = await _lookup(one, context, looked)
            except Exception as exc:  # execution reports it, from this very read
                results[index] = exc
            done.append(index)

        with Span("plan"):  # the node calls' parent span, as under execution
            if len(reads) == 1:
                await read(0)
            elif reads:  # concurrently, in field order, as execution resolves root fields
                await asyncio.gather(*(read(i) for i in range(len(reads))))
        by_root = {id(a): r for a, r in zip(reads, results, strict=True)}
        try:
            data = {}
            for a in asked:
                if id(a) in kept:
                    data[a.root.key] = kept[id(a)][0]
                    continue
                result = by_root.get(id(a))
                if isinstance(result, Exception):
                    return Replay(list(zip(reads, results, strict=True)))
                rows = None if result is None else _read_rows(result)
                data[a.root.key] = _value(a.root, rows, self._made)
        except (_Doubt, GraphQLError, GatewayError, TypeError, ValueError):
            return Replay(list(zip(reads, results, strict=True)))
        _add_tops(kept, context)  # before the reads': a resolver from memory adds it first
        for index in done:
            result = results[index]
            assert not isinstance(result, Exception)
            view = reads[index].root.view
            assert view is not None
            context.add_freshness(view, result.freshness)
            _record_missing(context, reads[index], result)
        self.answered += 1
        return data

    async def _entities_answer(
        self, plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
    ) -> dict[str, Any] | Replay | None:
        """`_entities` read as its resolver reads it (`gateway.api.fields.entities`: one
        lookup per entity type, concurrently, each through the cache), its items made
        without execution."""
        root = plan.roots[0]
        try:
            bound = plan.variables.bind(variables)
            wanted = _entities_asked(root, bound, context, self._cached_entities)
        except (_Doubt, Unbound, GraphQLError, GatewayError, TypeError, ValueError):
            return None
        asked = [a for a, _ in wanted]
        results: list[LookupResult | Exception] = [_NOT_READ] * len(asked)
        done: list[int] = []

        async def read(index: int) -> None:
            one = asked[index]
            assert one.root.view is not None
            try:
                results[index] = await context.planner.lookup(
                    one.root.view, one.keys, context.deadline, one.options
                )
            except Exception as exc:  # execution reports it, from this very read
                results[index] = exc
            done.append(index)

        with Span("plan"):
            await asyncio.gather(*(read(i) for i in range(len(asked))))
        count = sum(len(indexes) for _, indexes in wanted)
        items: list[Any] = [None] * count
        try:
            for (one, indexes), result in zip(wanted, results, strict=True):
                if isinstance(result, Exception):
                    raise _Doubt
                for index, row in zip(indexes, result.rows, strict=True):
                    items[index] = _object(one.root, row, self._made)
        except (_Doubt, GraphQLError, GatewayError, TypeError, ValueError):
            return Replay(list(zip(asked, results, strict=True)))
        for index in done:
            result, view = results[index], asked[index].root.view
            assert isinstance(result, LookupResult) and view is not None
            context.add_freshness(view, result.freshness)
        for (one, indexes), result in zip(wanted, results, strict=True):
            assert isinstance(result, LookupResult)
            record_missing(context, [root.key], indexes, per_key(one.keys, result))
        self.answered += 1
        return {root.key: items}


_NOT_READ = LookupResult([], [])
# of one read, as `Replay` keeps it
_Result = LookupResult | TopResult | KeyRead[Any] | TotalsResult | Exception
# the top-N a request asked, from the cache: by the id of its `_Asked`, its value, view and
# freshness
_Kept = dict[int, tuple[list[Any], View, list[dict[str, Any]]]]


def _add_tops(kept: _Kept, context: RequestContext) -> None:
    """The top-N answered from memory, once the whole answer is: their freshness, and the
    cache's hits (not counted when found: execution may yet answer them, and count them)."""
    for _, view, freshness in kept.values():
        context.add_freshness(view, freshness)
    if kept:
        assert context.cache is not None
        context.cache.top_answered(len(kept))


@dataclass(frozen=True, slots=True)
class _Asked:
    """A root field of a request: the keys it asks and the options it reads them with."""

    root: _Root
    keys: list[str]
    options: ReadOptions
    limit: int = 0  # of a top-N
    by: str | None = None  # the result an aggregate view's top-N ranks by
    window: datetime | None = None  # the start of a windowed view's window
    span: tuple[datetime | None, datetime | None] = (None, None)  # of a key's windows


# a read the fast path made: of a view (by name), what (a lookup, a top-N, a key's windows)
# and its arguments, and its options
_ReadKey = tuple[str, str, tuple[Any, ...], ReadOptions]


def _read_key(asked: _Asked) -> _ReadKey:
    view = asked.root.view
    assert view is not None
    if asked.root.top:
        return (view.name, "top", (asked.limit, asked.by, asked.window), asked.options)
    if asked.root.windows:
        return (view.name, "windows", (asked.keys[0], *asked.span), asked.options)
    if asked.root.totals:
        return (view.name, "totals", (None, None), asked.options)
    return (view.name, "lookup", tuple(asked.keys), asked.options)


@dataclass
class Replay:
    """The reads the fast path made before it found it cannot answer: execution gets their
    results (or exceptions) from `planner`, each once, rather than reading again."""

    reads: list[tuple[_Asked, _Result]]
    _left: dict[_ReadKey, list[_Result]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for asked, result in self.reads:
            self._left.setdefault(_read_key(asked), []).append(result)

    def planner(self, reads: Reads) -> Reads:
        """`reads` answering these reads from their results."""
        return cast(Reads, _Replayed(reads, self._left))


class _Replayed:
    """A planner whose lookups, top-N and windows made already are answered from their
    results; anything else is `reads`'."""

    def __init__(self, reads: Reads, left: dict[_ReadKey, list[_Result]]) -> None:
        self._reads = reads
        self._left = left

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reads, name)

    def _made(self, key: _ReadKey) -> _Result | None:
        """The result of the read `key` made already (raised again if it raised), or None
        when none is left: the planner reads."""
        made = self._left.get(key)
        result = made.pop(0) if made else None
        if isinstance(result, Exception):
            raise result
        return result

    async def lookup(
        self, view: Any, keys: Sequence[str], deadline: float, options: ReadOptions
    ) -> LookupResult:
        result = self._made((view.name, "lookup", tuple(keys), options))
        if result is None:
            return await self._reads.lookup(view, keys, deadline, options)
        assert isinstance(result, LookupResult)
        return result

    async def top(
        self,
        view: Any,
        limit: int,
        deadline: float,
        window: Any = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        result = self._made((view.name, "top", (limit, by, window), options))
        if result is None:
            return await self._reads.top(view, limit, deadline, window, options, by)
        assert isinstance(result, TopResult)
        return result

    async def windows(
        self,
        view: Any,
        key: str,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> KeyRead[list[WindowCount]]:
        result = self._made((view.name, "windows", (key, since, until), options))
        if result is None:
            return await self._reads.windows(view, key, since, until, deadline, options)
        assert isinstance(result, KeyRead)
        return result

    async def totals(
        self,
        view: Any,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> TotalsResult:
        result = self._made((view.name, "totals", (since, until), options))
        if result is None:
            return await self._reads.totals(view, since, until, deadline, options)
        assert isinstance(result, TotalsResult)
        return result


async def _lookup(
    asked: _Asked, context: RequestContext, looked: Mapping[str, CacheHits]
) -> LookupResult:
    view = asked.root.view
    assert view is not None
    # looked up without atLeast: a read with it waits for the feed, then looks again
    hits = looked.get(view.name) if asked.options.at_least is None else None
    return await context.planner.lookup(view, asked.keys, context.deadline, asked.options, hits)


async def _windows(asked: _Asked, context: RequestContext) -> KeyRead[list[WindowCount]]:
    """A key's windows, read as their resolver reads them (`gateway.api.fields.windowed`)."""
    view = asked.root.view
    assert view is not None
    since, until = asked.span
    key, deadline = asked.keys[0], context.deadline
    return await context.planner.windows(view, key, since, until, deadline, asked.options)


def _read_rows(result: LookupResult | TopResult | KeyRead[Any] | TotalsResult) -> list[Any]:
    """What a read found: a lookup's rows, a top-N's (rows, events or windows), a key's
    windows, the totals read; each becomes its field's object by the root's `convert`."""
    if isinstance(result, KeyRead):
        return cast(list[CachedRow], result.value or [])
    if isinstance(result, TotalsResult):
        return [result]
    return cast(list[CachedRow], result.rows)


async def _totals(asked: _Asked, context: RequestContext) -> TotalsResult:
    """A view's totals, read as their resolver reads them (`gateway.api.fields.totals`)."""
    view = asked.root.view
    assert view is not None
    return await context.planner.totals(view, None, None, context.deadline, asked.options)


def _totals_type(output: Any) -> GraphQLObjectType | None:
    """The `Totals` object type of a totals field's (non-null) type, else None."""
    inner = output.of_type if isinstance(output, GraphQLNonNull) else None
    if not isinstance(inner, GraphQLObjectType) or inner.is_type_of is not None:
        return None
    return inner if inner.name == TOTALS_TYPE else None


def _read_only(root: _Root) -> bool:
    """Whether the cache never answers `root`: a key's windows, a view's totals."""
    return root.windows or root.totals


async def _top(asked: _Asked, context: RequestContext) -> TopResult:
    """A top-N, read as its resolver reads it (`gateway.api.fields.count`, `.ranked`,
    `.windowed`)."""
    view = asked.root.view
    assert view is not None
    deadline, options = context.deadline, asked.options
    return await context.planner.top(view, asked.limit, deadline, asked.window, options, asked.by)


def _record_missing(
    context: RequestContext,
    asked: _Asked,
    result: LookupResult | TopResult | KeyRead[Any] | TotalsResult,
) -> None:
    """The field's PARTITION_UNAVAILABLE errors, as its resolver records them."""
    if isinstance(result, KeyRead):  # `record_key_read`: the field's, of its key
        if result.failure is not None:
            path = [asked.root.key]
            context.add_missing(path, result.partition, result.failure, [result.key])
        return
    if not result.failures:
        return
    if isinstance(result, TopResult | TotalsResult):  # `record_failures`: of no key
        for partition, error in sorted(result.failures.items()):
            context.add_missing([asked.root.key], partition, error, ())
        return
    failures = result.failures
    keyed = zip(asked.keys, result.partitions, map(failures.get, result.partitions), strict=True)
    context.add_missing_keys([asked.root.key], keyed)


def _asked(
    plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
) -> list[_Asked]:
    """The keys each root field asks and its read options, checked as its resolver checks
    them."""
    bound = plan.variables.bind(variables)
    if bound is None:  # execution reports why
        raise _Doubt
    asked = []
    for root in plan.roots:
        if root.arguments is None:
            asked.append(_Asked(root, [], _TYPENAME_READ))
            continue
        arguments = root.arguments.bind(bound)
        _check_read(root, arguments, context)
        options = ReadOptions(arguments.get("maxLag"), caller=context.principal.subject)
        if root.top:
            limit = _limit(root, arguments, context)
            window = _window(root, arguments)
            asked.append(_Asked(root, [], options, limit, _by(root, arguments), window))
        elif root.windows:
            keys, span = _keys(root, arguments, context), _span(root, arguments)
            asked.append(_Asked(root, keys, options, span=span))
        elif root.totals:
            asked.append(_Asked(root, [], options))
        else:
            asked.append(_Asked(root, _keys(root, arguments, context), options))
    return asked


def _entities_asked(
    root: _Root,
    bound: VariableValues | None,
    context: RequestContext,
    cached: Mapping[str, Entity],
) -> list[tuple[_Asked, list[int]]]:
    """The lookup of each entity type `_entities` asks for (in the order the types first
    appear) and the indexes of its representations, checked as its resolver checks them;
    _Doubt where it would answer an error."""
    assert root.entities is not None and root.arguments is not None
    if bound is None:
        raise _Doubt
    representations = root.arguments.bind(bound).get("representations")
    if not isinstance(representations, list):
        raise _Doubt
    context.planner.check_representations(len(representations))
    entities = root.entities
    wanted: dict[str, tuple[list[str], list[int]]] = {}
    for index, representation in enumerate(representations):
        name, key = parse_representation(cached, index, representation)
        one = entities[name]
        assert one.view is not None
        authorize_view(context, one.view)
        keys, indexes = wanted.setdefault(name, ([], []))
        keys.append(key)
        indexes.append(index)
    options = ReadOptions(caller=context.principal.subject)
    asked = []
    for name, (keys, indexes) in wanted.items():
        view = entities[name].view
        assert view is not None
        context.planner.check_keys(view, keys, counted=False)
        asked.append((_Asked(entities[name], keys, options), indexes))
    return asked


_TYPENAME_READ = ReadOptions()


# -- the plan's parts ------------------------------------------------------------------


def _shape(output: Any) -> tuple[bool, bool, GraphQLObjectType | None]:
    """Of a lookup field's type: whether it is a list, whether its rows may be null, and
    the rows' object type (None when the type is not one or a list of one)."""
    if isinstance(output, GraphQLNonNull):
        output = output.of_type
    many = isinstance(output, GraphQLList)
    if many:
        output = output.of_type
    nullable = not isinstance(output, GraphQLNonNull)
    if not nullable:
        output = output.of_type
    return many, nullable, output if isinstance(output, GraphQLObjectType) else None


def _leaves(
    object_type: GraphQLObjectType,
    selections: Iterable[Any],
    fragments: Fragments,
    decided: Decided,
) -> tuple[_Leaf, ...] | None:
    """The selected fields of a row (fragments spread, what `decided` leaves out left
    out) when they are plain scalar fields or `__typename`."""
    fields = collect(selections, fragments, object_type.name, decided)
    if fields is None:
        return None
    leaves = []
    for leaf in fields:
        name = leaf.name.value
        if leaf.arguments or leaf.selection_set is not None:
            return None
        if name == TYPENAME:
            leaves.append(_Leaf(response_key(leaf), None, None, True))
            continue
        field = object_type.fields.get(name)
        if field is None or not reads_attribute(field):
            return None  # only strawberry's resolvers of plain attributes are read here
        output, non_null = field.type, isinstance(field.type, GraphQLNonNull)
        if non_null:
            output = output.of_type
        if not isinstance(output, GraphQLScalarType):
            return None
        leaves.append(
            _Leaf(response_key(leaf), field.resolve, output.coerce_output_value, non_null)
        )
    return tuple(leaves)


# -- answering --------------------------------------------------------------------------


def _check_read(root: _Root, arguments: Mapping[str, Any], context: RequestContext) -> None:
    """_Doubt where a field's resolver would not answer its coerced `arguments` from the
    cache (`gateway.api.fields.common`: the view's scope, `atLeast`, `maxLag`)."""
    view = root.view
    assert view is not None
    if view.scope is not None and view.scope not in context.principal.scopes:
        raise _Doubt  # execution says FORBIDDEN for this field
    if arguments.get("atLeast") is not None:
        raise _Doubt  # waits for the pipeline first
    max_lag = arguments.get("maxLag")
    if max_lag is not None and max_lag < 0:
        raise _Doubt


def _by(root: _Root, arguments: Mapping[str, Any]) -> str | None:
    """The result an aggregate view's top-N ranks by (its enum value's name of the result),
    None for a count view's."""
    if not root.ranked:
        return None
    by = getattr(arguments.get("by"), "value", arguments.get("by"))  # the enum's member
    if not isinstance(by, str):
        raise _Doubt
    return by


def _span(root: _Root, arguments: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The `from` and `to` of a key's windows (each None when not given or null), checked
    as `Planner.windows` checks them before it reads: a resolver failing before its first
    await makes execution drop its siblings' answers, so execution must answer it."""
    assert root.view is not None
    since, until = arguments.get("from"), arguments.get("to")
    if not all(t is None or isinstance(t, datetime) for t in (since, until)):
        raise _Doubt
    inputs.time_range(root.view, since, until)  # a GatewayError: execution reports it
    return since, until


def _window(root: _Root, arguments: Mapping[str, Any]) -> datetime | None:
    """The start of the window a windowed view's top-N asks (`WindowInput`, coerced to a
    dict), None for another view's."""
    if not root.windowed:
        return None
    assert root.view is not None
    window = arguments.get("window")
    start = window.get("start") if isinstance(window, dict) else None
    if not isinstance(start, datetime):
        raise _Doubt
    inputs.top_window(root.view, start)  # as `_span`: a GatewayError, execution reports it
    return start


def _limit(root: _Root, arguments: Mapping[str, Any], context: RequestContext) -> int:
    """The `limit` of a top-N's coerced `arguments`, checked as `Planner.top` checks it."""
    view = root.view
    assert view is not None
    limit = arguments.get("limit")
    if not isinstance(limit, int):
        raise _Doubt
    context.planner.check_limit(view, limit)  # a GatewayError: execution reports it
    return limit


def _keys(root: _Root, arguments: Mapping[str, Any], context: RequestContext) -> list[str]:
    """The keys of a lookup's coerced `arguments`, or _Doubt where its resolver would not
    answer them (`gateway.api.fields.lookup`)."""
    view = root.view
    assert view is not None
    many = root.many and not root.windows  # a key's windows are a list too
    given = arguments[view.keys_arg] if many else [arguments[view.key_field]]
    if not isinstance(given, list) or any(k is None for k in given):
        raise _Doubt
    texts = key_texts(view, given)  # a GatewayError: execution reports it
    context.planner.check_keys(view, texts)
    return texts


# what a request whose keys the cache does not all hold has of it: nothing, so the read of
# each view decides for itself whether to look (`Planner.lookup`)
_NOT_LOOKED: Mapping[str, CacheHits] = {}


def _by_view(asked: Iterable[_Asked]) -> dict[str, tuple[View, list[str]]]:
    """The keys asked of each view (by name), each once."""
    keys: dict[str, tuple[View, dict[str, None]]] = {}
    for a in asked:
        view = a.root.view
        if view is not None:
            keys.setdefault(view.name, (view, {}))[1].update(dict.fromkeys(a.keys))
    return {name: (view, list(unique)) for name, (view, unique) in keys.items()}


def _keys_of(view: View, keys: list[str], context: RequestContext) -> dict[int, list[str]]:
    """`keys` by partition, as the planner groups a lookup's keys."""
    return group_keys(keys, context.feed.current.partition_count(view), view)[1]


def _rows(asked: _Asked, found: Mapping[str, Any]) -> list[CachedRow] | None:
    """The cached rows of the keys `asked`, in order (None for `__typename`)."""
    if asked.root.view is None:
        return None
    rows = found[asked.root.view.name].rows
    return [rows[key] for key in asked.keys]


def _value(root: _Root, rows: Sequence[CachedRow] | None, made: _Made) -> Any:
    """What a root field answers: its rows' objects (one for a point lookup)."""
    if root.view is None or rows is None:
        return root.type_name
    if root.many:
        return [_object(root, row, made) for row in rows]
    return _object(root, rows[0], made)


def _object(root: _Root, row: CachedRow, made: _Made) -> dict[str, Any] | None:
    """What execution makes of one row: the selected leaves, in order, serialized (the
    same dict for equal rows: nothing changes it once made)."""
    if row is None:
        if not root.nullable_rows:
            raise _Doubt
        return None
    if not isinstance(row, Row):  # an event's values: made each time
        return _made(root, row)
    # atoms only, key and values: the collector untracks them, so a full memo adds nothing
    # to what a full garbage collection walks (a key holding the row object did: issue 31)
    key = (root.ident, row.key, row.count)
    values = made.get(key)
    if values is None:
        values = _made(root, row)
        if len(made) >= _MEMO_ROWS:
            made.clear()
        made[key] = values
    return values


def _made(root: _Root, row: Row | Event) -> dict[str, Any]:
    assert root.convert is not None
    source = root.convert(row)
    values: dict[str, Any] = {}
    for leaf in root.leaves:
        if leaf.resolve is None:
            values[leaf.key] = root.type_name
            continue
        value = leaf.resolve(source, None)
        if value is None:
            if leaf.non_null:
                raise _Doubt
            values[leaf.key] = None
            continue
        assert leaf.serialize is not None
        serialized = leaf.serialize(value)
        if serialized is None or serialized is Undefined:
            raise _Doubt
        values[leaf.key] = serialized
    return values
