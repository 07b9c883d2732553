"""The fast path's plans: what a query of lookups asks, derived once per document.

Once per validated document and operation (kept with the cached document, bounded like
it), `Plans.plan` derives a `Plan` when the operation is a query made only of point and
multi-key lookups of the views the cache holds (`gateway.reads.kinds.cacheable`: count,
latest and aggregate views), top-N (of count views, of aggregate views by any of their
numeric results, of one window of windowed views), the windows of one key of windowed
views, every view's totals, a page of one key's events or its event as of a time (history
views), a page of every view's scan, and `__typename`, with arguments from literals or
variables, aliases allowed. Lookups, top-N, windows and count views' totals select plain
scalar fields and `__typename`; the other fields, whose objects hold objects, are written
by a writer compiled from their selection (`gateway.execute.writer`). Fields are collected
as graphql-core collects them (`gateway.execute.selections`: fragments on the type they
select from, or on an interface or union it belongs to, spread in place, a leaf asked twice
once). Or of federation's `_entities` alone, selecting `__typename` and fragments on the
entity types of those views (or on `_Entity`), each of plain scalar fields (as routers ask
it). `@skip` and `@include` are decided per request (`gateway.execute.conditions`): an
operation has a plan per outcome of its conditions, for its first few outcomes. Other
directives, a condition that is no boolean, any other field, one response key of two
sub-selections: no plan, the document is executed (`gateway.execute.fastpath` answers a
plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import strawberry
from graphql import (
    FieldNode,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    OperationDefinitionNode,
    OperationType,
    get_named_type,
)

from gateway.api.fields import Entity, RowType, ScanType, attribute
from gateway.api.fields.totals import TOTALS_TYPE, totals_of
from gateway.api.schema import (
    entities_of,
    page_types_of,
    row_types_of,
    scan_types_of,
    totals_types_of,
)
from gateway.execute.binding import Arguments, Variables
from gateway.execute.conditions import Conditional, conditional_nodes, decide
from gateway.execute.selections import (
    Decided,
    Fragments,
    Members,
    collect,
    fragment_of,
    fragments_of,
    included,
    meets,
    members_of,
    response_key,
)
from gateway.execute.writer import TYPENAME, Complete, complete, reads_attribute
from gateway.reads.kinds import cacheable
from runtime.graphql_http import Prepared
from runtime.plainfields import plain_attribute
from schema import View

__all__ = ["Leaf", "Plan", "Plans", "Root"]

# names a root field in the fast path's memo of made rows for as long as the process lives
_ROOTS = count()
_NO_PLAN = object()  # kept in a document's memo: an operation whose conditions are not plain
_PLANS_PER_OPERATION = 8  # outcomes of an operation's conditions with a plan kept
_ENTITIES = "_entities"


@dataclass(frozen=True, slots=True)
class Leaf:
    """A selected field of a row's object: its resolver and serializer (none for
    `__typename`), whether its type forbids null, and its field's name."""

    key: str  # the response key (alias or name)
    resolve: Callable[..., Any] | None
    serialize: Callable[[Any], Any] | None
    non_null: bool
    name: str


@dataclass(frozen=True, slots=True)
class Root:
    """A root field of the operation: a lookup of `view` (several keys when `many`), or
    the query type's `__typename` when `view` is None."""

    key: str
    view: View | None
    many: bool
    convert: Callable[[Any], Any] | None  # a row (or totals read) -> the field's object
    type_name: str  # of the object (of the query type for `__typename`)
    leaves: tuple[Leaf, ...]
    nullable_rows: bool  # whether an unknown key may be answered null
    arguments: Arguments | None
    ident: int  # names it in the fast path's memo of made rows (`_ROOTS`)
    top: bool = False  # the top-N of `view`, not a lookup
    ranked: bool = False  # a top-N by a result the request chooses (`by`): an aggregate view's
    windowed: bool = False  # a top-N of one window (`window`): a windowed view's
    windows: bool = False  # the windows of one key (`from`, `to`): a windowed view's
    totals: bool = False  # the totals of `view`'s keys, added up from every partition
    history: bool = False  # a page of one key's events (a history view's connection)
    as_of: bool = False  # of a history view's field of a key's event as of a time (`at`)
    scan: ScanType | None = None  # a page of the whole view (its scan field's connection)
    # of a root whose objects hold objects (a page of events, an aggregate or windowed
    # view's totals): what execution makes of the object `convert` makes of the read
    write: Complete | None = None
    # federation's `_entities` (the plan's only root): a root per entity type the cache
    # holds, by type name, whose leaves are what the selection asks of that type
    entities: Mapping[str, Root] | None = None
    # a row -> the values by field name of the object `convert` makes of it, when every
    # leaf is proved to read its field's value there (`_values_reader`): the object itself
    # need not be made
    values: Callable[[Any], Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """How to answer one operation from the cache."""

    operation: OperationDefinitionNode
    roots: tuple[Root, ...]
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


class Plans:
    """Derives the plans of operations over `schema` (the one
    `gateway.api.schema.build_schema` made for `catalogue`), each once per document."""

    def __init__(self, schema: strawberry.Schema, catalogue: Iterable[View]) -> None:
        self._schema = schema._schema
        self._members = members_of(self._schema)  # of fragments on interfaces and unions
        self._entities = entities_of(schema)
        self._row_types = row_types_of(schema)  # of windowed views, which have no entity
        self._lookups: dict[str, _Lookup] = {}
        self._tops: dict[str, View] = {}  # the top-N fields: count, aggregate, windowed
        self._windows: dict[str, View] = {}  # the windows-of-a-key fields of windowed views
        self._totals: dict[str, View] = {}  # the fields of a view's `Totals`
        self._other_totals = totals_types_of(schema)  # the others, by field name
        self._histories = page_types_of(schema)  # a page of a key's events, by field name
        self._scans = scan_types_of(schema)  # a page of a whole view, by field name
        # the entity types whose views the cache holds, by type name: `_entities` of them
        self.cached_entities = {
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
        selections = operation.selection_set.selections
        fields = collect(selections, fragments, query.name, decided, self._members)
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

    def _root(self, node: FieldNode, fragments: Fragments, decided: Decided) -> Root | None:
        name = node.name.value
        query = self._schema.query_type
        if query is None:
            return None
        if name == TYPENAME:
            return Root(
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
        if name in self._other_totals:
            totals = self._other_totals[name]
            root = self._written_root(node, fragments, decided, totals.view, totals.convert)
            return None if root is None else replace(root, totals=True)
        if name in self._histories:
            page = self._histories[name]
            root = self._written_root(node, fragments, decided, page.view, page.convert)
            return None if root is None else replace(root, history=True, as_of=page.as_of)
        if name in self._scans:
            scan = self._scans[name]
            root = self._written_root(node, fragments, decided, scan.view, scan.convert)
            return None if root is None else replace(root, scan=scan)
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
    ) -> Root | None:
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
        selections = node.selection_set.selections
        leaves = _leaves(object_type, selections, fragments, decided, self._members)
        if leaves is None:
            return None
        return Root(
            response_key(node), view, many, entity.convert, object_type.name, leaves,
            nullable_rows, Arguments(field, node), next(_ROOTS), top, top and "by" in field.args,
            top and "window" in field.args, windows,
            values=_values_reader(entity, object_type, leaves),
        )  # fmt: skip

    def _totals_root(
        self, node: FieldNode, fragments: Fragments, decided: Decided, view: View
    ) -> Root | None:
        """The root of a view's totals field (a non-null `Totals`) selecting plain leaves."""
        query = self._schema.query_type
        assert query is not None
        field = query.fields[node.name.value]
        object_type = _totals_type(field.type)
        if node.selection_set is None or object_type is None:
            return None
        selections = node.selection_set.selections
        leaves = _leaves(object_type, selections, fragments, decided, self._members)
        if leaves is None:
            return None
        return Root(
            response_key(node), view, False, totals_of, object_type.name, leaves, False,
            Arguments(field, node), next(_ROOTS), totals=True,
        )  # fmt: skip

    def _written_root(
        self,
        node: FieldNode,
        fragments: Fragments,
        decided: Decided,
        view: View,
        convert: Callable[[Any], Any],
    ) -> Root | None:
        """The root of a field whose objects hold objects (a page of a key's events or a
        key's event as of a time, the totals of an aggregate or windowed view, a page of a
        scan), when a writer proves its selection (`gateway.execute.writer`); `convert`
        makes its object of what it reads. The caller says which it is."""
        query = self._schema.query_type
        assert query is not None
        field = query.fields[node.name.value]
        write = complete(field.type, node.selection_set, fragments, decided, self._members)
        if write is None:
            return None
        type_name = get_named_type(field.type).name
        return Root(
            response_key(node), view, False, convert, type_name, (), False,
            Arguments(field, node), next(_ROOTS), write=write,
        )  # fmt: skip

    def _entities_root(
        self, node: FieldNode, fragments: Fragments, decided: Decided
    ) -> Root | None:
        """The root of `_entities` when its selection is `__typename` and fragments (inline
        or named) on entity types of views the cache holds, on the `_Entity` union or
        without a type condition, each of plain leaves (a type without a fragment answers
        `{}`, or its `__typename`)."""
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
            name = None if condition is None else condition.name.value
            if name is not None and name not in self.cached_entities and name not in self._members:
                return None
            selected += [(name, f) for f in fragment.selection_set.selections]
        per_type: dict[str, Root] = {}
        for type_name, entity in self.cached_entities.items():
            object_type = self._schema.get_type(type_name)
            if not isinstance(object_type, GraphQLObjectType):
                return None
            mine = [f for on, f in selected if on is None or meets(type_name, on, self._members)]
            leaves = _leaves(object_type, mine, fragments, decided, self._members)
            if leaves is None:
                return None
            per_type[type_name] = Root(
                response_key(node), entity.view, False, entity.convert, type_name, leaves, True,
                None, next(_ROOTS), values=_values_reader(entity, object_type, leaves),
            )  # fmt: skip
        return Root(
            response_key(node), None, True, None, query.name, (), True, Arguments(field, node),
            next(_ROOTS), entities=per_type,
        )  # fmt: skip


def _totals_type(output: Any) -> GraphQLObjectType | None:
    """The `Totals` object type of a totals field's (non-null) type, else None."""
    inner = output.of_type if isinstance(output, GraphQLNonNull) else None
    if not isinstance(inner, GraphQLObjectType) or inner.is_type_of is not None:
        return None
    return inner if inner.name == TOTALS_TYPE else None


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
    members: Members,
) -> tuple[Leaf, ...] | None:
    """The selected fields of a row (fragments spread, on interfaces and unions of
    `members` too, what `decided` leaves out left out) when they are plain scalar fields or
    `__typename`."""
    fields = collect(selections, fragments, object_type.name, decided, members)
    if fields is None:
        return None
    leaves = []
    for leaf in fields:
        name = leaf.name.value
        if leaf.arguments or leaf.selection_set is not None:
            return None
        if name == TYPENAME:
            leaves.append(Leaf(response_key(leaf), None, None, True, name))
            continue
        field = object_type.fields.get(name)
        if field is None or not reads_attribute(field):
            return None  # only strawberry's resolvers of plain attributes are read here
        output, non_null = field.type, isinstance(field.type, GraphQLNonNull)
        if non_null:
            output = output.of_type
        if not isinstance(output, GraphQLScalarType):
            return None
        serialize = output.coerce_output_value
        leaves.append(Leaf(response_key(leaf), field.resolve, serialize, non_null, name))
    return tuple(leaves)


def _values_reader(
    entity: Entity | RowType, object_type: GraphQLObjectType, leaves: tuple[Leaf, ...]
) -> Callable[[Any], Mapping[str, Any]] | None:
    """`entity.values` when each of `leaves` is a plain attribute `make` sets from those
    values, read with `getattr`; else None (the object is made and its fields resolved)."""
    if not isinstance(entity, Entity):
        return None
    for leaf in leaves:
        if leaf.resolve is None:  # `__typename`
            continue
        if plain_attribute(object_type.fields[leaf.name]) != attribute(leaf.name):
            return None
    return entity.values
