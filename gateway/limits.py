"""Query limits: depth, aliases, root fields, fan-out cost and introspection, checked on the
parsed document before the schema validates and runs it.

A document's shape is computed once per (document, operation name) and cached, like the
parse and validation caches; its cost is evaluated per request, since `limit`, `first` and
key lists may come in variables. The cost is what the nodes must read: a top-N (of one
window, for windowed views) reads every partition, P x limit; a multi-key lookup its keys
(`_entities` its representations); a history page `first`; a key's windows as many as the
view's retention keeps; any other field 1 (each kind prices its fields, `gateway.kinds`).
A size outside its argument's bounds is clamped here, so the resolver reports it as
BAD_USER_INPUT instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValueNode,
    VariableNode,
    parse,
    value_from_ast_untyped,
)

from gateway.config import GatewayConfig
from gateway.errors import (
    IntrospectionDisabledError,
    QueryLimitError,
    QueryTooCostlyError,
    QueryTooDeepError,
    TooManyAliasesError,
    TooManyRootFieldsError,
)
from gateway.kinds import kind_of
from gateway.prices import ONE, Price
from schema import View

__all__ = ["QueryLimits", "Shape"]

_INTROSPECTION = frozenset({"__schema", "__type"})
_MAX_NESTING = 200  # selection sets in selection sets, through fragments: a recursion guard
_CACHE_SIZE = 1024  # distinct documents whose shape is kept, as for parsing and validation
_SHOWN_NODES = 5  # locations named by one error


@dataclass(frozen=True)
class _Term:
    """A root field of the operation (fields of one response key run once, however often
    fragments repeat them) and the size it asks for."""

    node: FieldNode
    price: Price
    literal: int  # the size the document asks for (or the argument's default)
    variable: str | None = None  # the variable carrying the size instead, if any
    variable_default: Any = None


@dataclass(frozen=True)
class Shape:
    """What the limits need to know of one operation of a document."""

    depth: int  # of the deepest field; root fields are depth 1
    deepest: FieldNode | None  # None when the walk stopped at _MAX_NESTING
    aliases: int  # aliased fields written in the operation and the fragments it uses
    introspection: tuple[FieldNode, ...]
    terms: tuple[_Term, ...]  # one per root response key, __typename left out

    @property
    def root_fields(self) -> int:
        return len(self.terms)


class _TooNested(Exception):
    pass


_Deepest = tuple[int, FieldNode | None]


class _Walker:
    """Walks an operation, each fragment once however often it is spread, so a document
    spreading fragments exponentially is measured in linear time."""

    def __init__(self, fragments: Mapping[str, FragmentDefinitionNode]) -> None:
        self.aliases = 0
        self.introspection: list[FieldNode] = []
        self._fragments = fragments
        self._depths: dict[str, _Deepest] = {}
        self._visiting: set[str] = set()

    def depth(self, selections: SelectionSetNode, nesting: int = 0) -> _Deepest:
        """The depth of the deepest field under `selections`, and that field; counts the
        aliases and introspection fields on the way."""
        if nesting > _MAX_NESTING:
            raise _TooNested
        best: _Deepest = (0, None)
        for selection in selections.selections:
            found = best
            if isinstance(selection, FieldNode):
                found = self._field(selection, nesting)
            elif isinstance(selection, FragmentSpreadNode):
                found = self._fragment(selection.name.value, nesting)
            elif isinstance(selection, InlineFragmentNode):
                found = self.depth(selection.selection_set, nesting + 1)
            if found[0] > best[0]:
                best = found
        return best

    def _field(self, node: FieldNode, nesting: int) -> _Deepest:
        self.aliases += node.alias is not None
        if node.name.value in _INTROSPECTION:
            self.introspection.append(node)
        if node.selection_set is None:
            return (1, node)
        depth, deepest = self.depth(node.selection_set, nesting + 1)
        return (1 + depth, deepest or node)

    def _fragment(self, name: str, nesting: int) -> _Deepest:
        done = self._depths.get(name)
        if done is not None:
            return done
        fragment = self._fragments.get(name)
        if fragment is None or name in self._visiting:
            return (0, None)  # unknown fragments and cycles fail the schema's validation
        self._visiting.add(name)
        try:
            done = self._depths[name] = self.depth(fragment.selection_set, nesting + 1)
        finally:
            self._visiting.discard(name)
        return done

    def roots(self, selections: SelectionSetNode, seen: set[str]) -> dict[str, FieldNode]:
        """The first field of each response key of `selections`, through fragments (each
        once: spreading it again adds no key). Call after `depth`, which bounds the nesting."""
        keys: dict[str, FieldNode] = {}
        for selection in selections.selections:
            inner: SelectionSetNode | None = None
            if isinstance(selection, FieldNode):
                keys.setdefault((selection.alias or selection.name).value, selection)
            elif isinstance(selection, InlineFragmentNode):
                inner = selection.selection_set
            elif isinstance(selection, FragmentSpreadNode):
                fragment = self._fragments.get(selection.name.value)
                if fragment is not None and selection.name.value not in seen:
                    seen.add(selection.name.value)
                    inner = fragment.selection_set
            if inner is not None:
                for key, node in self.roots(inner, seen).items():
                    keys.setdefault(key, node)
        return keys


def _operation(document: DocumentNode, name: str | None) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if name is None:
        return operations[0] if len(operations) == 1 else None
    return next((o for o in operations if o.name is not None and o.name.value == name), None)


def _size_of(value: Any) -> int:
    """The size a value asks for: a list's length, an integer itself, else 1 (null, or a
    value the schema will refuse with BAD_USER_INPUT anyway)."""
    if isinstance(value, list | tuple):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return 1


def _literal(node: ValueNode) -> int:
    if isinstance(node, IntValueNode):
        return int(node.value)
    if isinstance(node, ListValueNode):
        return len(node.values)
    return 1


class QueryLimits:
    """The limits of `config` over the schema of `catalogue`, with a cache of shapes."""

    def __init__(
        self, config: GatewayConfig, schema: GraphQLSchema, catalogue: Iterable[View]
    ) -> None:
        self._config = config
        self._schema = schema
        self._prices = _prices(config, catalogue)
        self.shape = functools.lru_cache(maxsize=_CACHE_SIZE)(self._analyze)

    def check(
        self,
        query: str,
        operation: str | None,
        variables: Mapping[str, Any] | None,
        partitions: Callable[[View], int],
    ) -> list[GraphQLError]:
        """One error per limit the operation exceeds; none for a document that does not
        parse or names no operation (the schema reports those)."""
        return self.check_shape(self.shape(query, operation), variables, partitions)

    def check_shape(
        self,
        shape: Shape | None,
        variables: Mapping[str, Any] | None,
        partitions: Callable[[View], int],
    ) -> list[GraphQLError]:
        """`check` for a shape from `analyze` (a caller that caches its documents)."""
        if shape is None:
            return []
        refused: list[tuple[QueryLimitError, list[FieldNode]]] = []
        config = self._config
        if shape.introspection and not config.introspection:
            disabled = IntrospectionDisabledError(GatewayConfig.ENV["introspection"])
            refused.append((disabled, [*shape.introspection]))
        if shape.depth > config.max_depth:
            refused.append((_too_deep(shape, config.max_depth), _nodes(shape.deepest)))
        if shape.aliases > config.max_aliases:
            refused.append((_too_many_aliases(shape, config.max_aliases), []))
        if shape.root_fields > config.max_root_fields:
            refused.append((_too_many_roots(shape, config.max_root_fields), []))
        costs = [(term, self._cost(term, variables or {}, partitions)) for term in shape.terms]
        total = sum(cost for _, cost in costs)
        if total > config.max_cost:
            refused.append((_too_costly(costs, total, config.max_cost), []))
        return [
            GraphQLError(str(error), nodes[:_SHOWN_NODES] or None, original_error=error)
            for error, nodes in refused
        ]

    def _analyze(self, query: str, operation_name: str | None) -> Shape | None:
        try:
            document = parse(query)
        except GraphQLSyntaxError:
            return None
        return self.analyze(document, operation_name)

    def analyze(self, document: DocumentNode, operation_name: str | None) -> Shape | None:
        """The shape of one operation of a parsed document; None when it names none."""
        operation = _operation(document, operation_name)
        if operation is None:
            return None
        fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        walker = _Walker(fragments)
        try:
            depth, deepest = walker.depth(operation.selection_set)
        except _TooNested:
            return Shape(_MAX_NESTING + 1, None, 0, (), ())
        roots = walker.roots(operation.selection_set, set())
        roots.pop("__typename", None)
        defaults = {
            d.variable.name.value: value_from_ast_untyped(d.default_value)
            for d in operation.variable_definitions or ()
            if d.default_value is not None
        }
        return Shape(
            depth=depth,
            deepest=deepest,
            aliases=walker.aliases,
            introspection=tuple(walker.introspection),
            terms=tuple(self._term(node, defaults) for node in roots.values()),
        )

    def _term(self, node: FieldNode, defaults: Mapping[str, Any]) -> _Term:
        name = node.name.value
        price = self._prices.get(name, ONE)
        if price.argument is None:
            return _Term(node, price, price.fixed)
        given = next(
            (a.value for a in node.arguments or () if a.name.value == price.argument), None
        )
        if isinstance(given, VariableNode):
            variable = given.name.value
            return _Term(node, price, 1, variable, defaults.get(variable))
        if given is not None:
            return _Term(node, price, _literal(given))
        return _Term(node, price, self._default_size(name, price.argument))

    def _default_size(self, field_name: str, argument: str) -> int:
        query = self._schema.query_type
        definition = query.fields.get(field_name) if query is not None else None
        spec = definition.args.get(argument) if definition is not None else None
        return 1 if spec is None else _size_of(spec.default_value)

    @staticmethod
    def _cost(term: _Term, variables: Mapping[str, Any], partitions: Callable[[View], int]) -> int:
        price = term.price
        size = term.literal
        if term.variable is not None:
            size = _size_of(variables.get(term.variable, term.variable_default))
        size = max(size, 1) if price.bound is None else min(max(size, 1), price.bound)
        width = partitions(price.view) if price.fanout and price.view is not None else 1
        return width * size


def _prices(config: GatewayConfig, catalogue: Iterable[View]) -> dict[str, Price]:
    """The price of every root field that reads more than one row or partition."""
    # federation's batch lookup: each representation is a point lookup
    prices = {
        "_entities": Price(argument="representations", bound=config.max_entity_representations)
    }
    for view in catalogue:
        prices.update(kind_of(view).prices(view, config))
    return prices


def _nodes(node: FieldNode | None) -> list[FieldNode]:
    return [] if node is None else [node]


def _too_deep(shape: Shape, limit: int) -> QueryTooDeepError:
    depth = "more than 200" if shape.deepest is None else str(shape.depth)
    return QueryTooDeepError(
        f"the query nests fields {depth} levels deep, at most {limit}",
        actual=shape.depth,
        limit=limit,
        variable=GatewayConfig.ENV["max_depth"],
    )


def _too_many_aliases(shape: Shape, limit: int) -> TooManyAliasesError:
    return TooManyAliasesError(
        f"the query has {shape.aliases} aliases, at most {limit}",
        actual=shape.aliases,
        limit=limit,
        variable=GatewayConfig.ENV["max_aliases"],
    )


def _too_many_roots(shape: Shape, limit: int) -> TooManyRootFieldsError:
    return TooManyRootFieldsError(
        f"the query asks for {shape.root_fields} root fields, at most {limit}: split it into "
        "several requests",
        actual=shape.root_fields,
        limit=limit,
        variable=GatewayConfig.ENV["max_root_fields"],
    )


def _label(term: _Term) -> str:
    node = term.node
    name = node.name.value
    return name if node.alias is None else f"{node.alias.value}: {name}"


def _too_costly(costs: list[tuple[_Term, int]], total: int, limit: int) -> QueryTooCostlyError:
    """Name the dearest fields, so the client sees what to ask less of."""
    dearest = sorted(costs, key=lambda tc: -tc[1])[:3]
    parts = ", ".join(f"{_label(term)} {cost}" for term, cost in dearest)
    more = f" and {len(costs) - 3} more fields" if len(costs) > 3 else ""
    return QueryTooCostlyError(
        f"the query costs {total}, at most {limit} (a top-N costs partitions x limit, a lookup "
        f"its keys, a history page `first`): {parts}{more}",
        actual=total,
        limit=limit,
        variable=GatewayConfig.ENV["max_cost"],
    )
