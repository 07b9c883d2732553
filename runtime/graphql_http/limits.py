"""Query limits decided on the parsed document, before it is validated or run: the same
measures for the node and the gateway, each server pricing its own fields.

- tokens: `parse_limited` stops the lexer after `max_tokens` tokens, so a huge body costs at
  most that much parsing (GRAPHQL_PARSE_FAILED, naming the variable);
- depth: of the deepest field, root fields being 1, through fragments;
- aliases: aliased fields and fields repeating a response key of their selection set, counted
  per fragment spread (a fragment spread ten times counts ten times, nested spreads
  multiply), over every operation and fragment of the document (what validation walks);
- cost: each root field's price (the server's: a top-N, a list of keys, a page) times the
  weight of what it selects: a field asked under n aliases is rendered n times, and a list
  field sized by an argument multiplies what it contains, down the tree.

Every walk visits each fragment once per distinct context (memoized), so a document spreading
fragments exponentially is measured in linear time. Refusals are `QueryLimitError`s, each
naming the variable that sets its limit; the shared response layer gives them their codes.

```
QueryLimitError                    the document exceeds a configured limit
├── QueryTooDeepError              QUERY_TOO_DEEP
├── TooManyAliasesError            TOO_MANY_ALIASES
├── TooManyRootFieldsError         TOO_MANY_ROOT_FIELDS (the gateway's)
├── QueryTooCostlyError            QUERY_TOO_COSTLY
└── IntrospectionDisabledError     INTROSPECTION_DISABLED
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
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

__all__ = [
    "MAX_NESTING",
    "IntrospectionDisabledError",
    "Limits",
    "Measure",
    "QueryLimitError",
    "QueryTooCostlyError",
    "QueryTooDeepError",
    "Size",
    "TooManyAliasesError",
    "TooManyRootFieldsError",
    "measure",
    "parse_limited",
    "size_of",
    "weigh",
]

INTROSPECTION = frozenset({"__schema", "__type"})
MAX_NESTING = 200  # selection sets in selection sets, through fragments: a recursion guard
_MAX_STEPS = 100_000  # selections one weighing visits, a guard past the memo
SHOWN_NODES = 5  # locations named by one error


# -- errors ------------------------------------------------------------------------------


class QueryLimitError(Exception):
    """The document asks more than a configured limit allows: `actual` against `limit`, set
    by the environment variable `variable`."""

    code: ClassVar[str] = "QUERY_LIMIT"

    def __init__(self, message: str, *, actual: int, limit: int, variable: str) -> None:
        super().__init__(f"{message} (set by {variable})")
        self.actual = actual
        self.limit = limit
        self.variable = variable

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "actual": self.actual, "limit": self.limit}

    def graphql(self, nodes: Sequence[FieldNode] = ()) -> GraphQLError:
        """The GraphQL error refusing the document, located at up to five of `nodes`."""
        return GraphQLError(str(self), [*nodes[:SHOWN_NODES]] or None, original_error=self)


class QueryTooDeepError(QueryLimitError):
    code = "QUERY_TOO_DEEP"


class TooManyAliasesError(QueryLimitError):
    code = "TOO_MANY_ALIASES"


class TooManyRootFieldsError(QueryLimitError):
    code = "TOO_MANY_ROOT_FIELDS"


class QueryTooCostlyError(QueryLimitError):
    code = "QUERY_TOO_COSTLY"


class IntrospectionDisabledError(QueryLimitError):
    code = "INTROSPECTION_DISABLED"

    def __init__(self, variable: str, server: str, schema_roots: Iterable[str] = ()) -> None:
        names = ", ".join(["__schema", "__type", *sorted(schema_roots)])
        super().__init__(
            f"introspection ({names}) is turned off on this {server}; __typename works",
            actual=1,
            limit=0,
            variable=variable,
        )

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code}


# -- parsing -----------------------------------------------------------------------------


def parse_limited(query: str, max_tokens: int, variable: str) -> DocumentNode:
    """`query` parsed, reading at most `max_tokens` tokens; a GraphQLError otherwise (for a
    longer document one naming `variable`, with `extensions.limit`)."""
    try:
        return parse(query, max_tokens=max_tokens)
    except GraphQLSyntaxError as error:
        if f"more than {max_tokens} tokens" not in error.message:
            raise
        raise GraphQLError(
            f"the document has more than {max_tokens} tokens, at most {max_tokens} (set by "
            f"{variable}): send a smaller document",
            extensions={"limit": max_tokens},
        ) from None


# -- measuring an operation -----------------------------------------------------------------


class _TooNested(Exception):
    pass


_Deepest = tuple[int, FieldNode | None]


@dataclass(frozen=True)
class Measure:
    """What the limits need of one operation of a document, measured once per document."""

    depth: int  # of the deepest field; root fields are depth 1
    deepest: FieldNode | None  # None when the walk stopped at MAX_NESTING
    aliases: int  # aliased and repeated fields per spread, of the heaviest definition
    introspection: tuple[FieldNode, ...]
    roots: Mapping[str, tuple[FieldNode, ...]]  # response key -> its fields, __typename out
    fragments: Mapping[str, FragmentDefinitionNode]
    defaults: Mapping[str, Any]  # the operation's variable defaults

    @property
    def too_nested(self) -> bool:
        return self.deepest is None and self.depth > MAX_NESTING


class _Walker:
    """Depth, aliases and introspection fields; each fragment walked once, however often it
    is spread, its counts multiplied by its spreads."""

    def __init__(self, fragments: Mapping[str, FragmentDefinitionNode]) -> None:
        self.introspection: list[FieldNode] = []
        self._fragments = fragments
        self._done: dict[str, tuple[_Deepest, int, dict[str, int]]] = {}
        self._visiting: set[str] = set()

    def walk(
        self, selections: SelectionSetNode, nesting: int = 0
    ) -> tuple[_Deepest, int, dict[str, int]]:
        """The deepest field under `selections`, its aliases and repeated fields (per spread),
        and how often it selects each response key (for its parent's repeats)."""
        if nesting > MAX_NESTING:
            raise _TooNested
        best: _Deepest = (0, None)
        aliases = 0
        keys: dict[str, int] = {}
        counted = 0  # repeats inside spread and inline fragments, already in their aliases
        for selection in selections.selections:
            found: _Deepest = (0, None)
            if isinstance(selection, FieldNode):
                found, inner = self._field(selection, nesting)
                aliases += inner
                key = (selection.alias or selection.name).value
                keys[key] = keys.get(key, 0) + 1
            else:
                if isinstance(selection, FragmentSpreadNode):
                    found, inner, held = self._fragment(selection.name.value, nesting)
                elif isinstance(selection, InlineFragmentNode):
                    found, inner, held = self.walk(selection.selection_set, nesting + 1)
                else:  # pragma: no cover - graphql-core has no other selection
                    continue
                aliases += inner
                counted += sum(held.values()) - len(held)
                for key, count in held.items():
                    keys[key] = keys.get(key, 0) + count
            if found[0] > best[0]:
                best = found
        repeats = sum(keys.values()) - len(keys) - counted
        return best, aliases + repeats, keys

    def _field(self, node: FieldNode, nesting: int) -> tuple[_Deepest, int]:
        aliased = node.alias is not None
        if node.name.value in INTROSPECTION:
            self.introspection.append(node)
        if node.selection_set is None:
            return (1, node), aliased
        (depth, deepest), aliases, _ = self.walk(node.selection_set, nesting + 1)
        return (1 + depth, deepest or node), aliases + aliased

    def _fragment(self, name: str, nesting: int) -> tuple[_Deepest, int, dict[str, int]]:
        done = self._done.get(name)
        if done is not None:
            return done
        fragment = self._fragments.get(name)
        if fragment is None or name in self._visiting:
            return (0, None), 0, {}  # unknown fragments and cycles fail validation
        self._visiting.add(name)
        try:
            done = self._done[name] = self.walk(fragment.selection_set, nesting + 1)
        finally:
            self._visiting.discard(name)
        return done


def _collect(
    sets: Sequence[SelectionSetNode],
    fragments: Mapping[str, FragmentDefinitionNode],
    keys: dict[str, list[FieldNode]],
    seen: set[str],
) -> int:
    """The fields of `sets` by response key, through fragments (each once, as GraphQL's
    CollectFields); returns the selections visited."""
    visited = 0
    for selection_set in sets:
        for selection in selection_set.selections:
            visited += 1
            if isinstance(selection, FieldNode):
                keys.setdefault((selection.alias or selection.name).value, []).append(selection)
            elif isinstance(selection, InlineFragmentNode):
                visited += _collect((selection.selection_set,), fragments, keys, seen)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = fragments.get(selection.name.value)
                if fragment is not None and selection.name.value not in seen:
                    seen.add(selection.name.value)
                    visited += _collect((fragment.selection_set,), fragments, keys, seen)
    return visited


def _operation_of(document: DocumentNode, operation: OperationDefinitionNode) -> Measure:
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    walker = _Walker(fragments)
    defaults = {
        d.variable.name.value: value_from_ast_untyped(d.default_value)
        for d in operation.variable_definitions or ()
        if d.default_value is not None
    }
    try:
        (depth, deepest), aliases, _ = walker.walk(operation.selection_set)
        introspection = tuple(walker.introspection)
        # what validation walks besides: the other operations and unused fragments
        for definition in document.definitions:
            if definition is not operation and isinstance(
                definition, OperationDefinitionNode | FragmentDefinitionNode
            ):
                (other, node), more, _ = walker.walk(definition.selection_set)
                aliases = max(aliases, more)
                if other > depth:
                    depth, deepest = other, node
    except _TooNested:
        return Measure(MAX_NESTING + 1, None, 0, (), {}, fragments, defaults)
    roots: dict[str, list[FieldNode]] = {}
    _collect((operation.selection_set,), fragments, roots, set())
    roots.pop("__typename", None)
    return Measure(
        depth=depth,
        deepest=deepest,
        aliases=aliases,
        introspection=introspection,
        roots={key: tuple(nodes) for key, nodes in roots.items()},
        fragments=fragments,
        defaults=defaults,
    )


def measure(document: DocumentNode, operation: OperationDefinitionNode) -> Measure:
    """The measure of `operation` of `document` (the document's other definitions count
    towards its depth and aliases too: validation walks them)."""
    return _operation_of(document, operation)


# -- weighing what a field selects ------------------------------------------------------------


class _Weigher:
    def __init__(
        self, fragments: Mapping[str, FragmentDefinitionNode], rows: Callable[[FieldNode], int]
    ) -> None:
        self._fragments = fragments
        self._rows = rows
        self._memo: dict[tuple[int, ...], int] = {}
        self._steps = 0

    def weight(self, sets: tuple[SelectionSetNode, ...], nesting: int) -> int:
        memo_key = tuple(id(s) for s in sets)
        done = self._memo.get(memo_key)
        if done is not None:
            return done
        if nesting > MAX_NESTING or self._steps > _MAX_STEPS:
            raise _TooNested
        self._memo[memo_key] = 1  # a fragment cycle (refused by validation) weighs 1
        keys: dict[str, list[FieldNode]] = {}
        self._steps += _collect(sets, self._fragments, keys, set())
        per_name: dict[str, int] = {}
        for nodes in keys.values():
            children = tuple(n.selection_set for n in nodes if n.selection_set is not None)
            inner = self.weight(children, nesting + 1) if children else 1
            name = nodes[0].name.value
            per_name[name] = per_name.get(name, 0) + max(self._rows(nodes[0]), 1) * inner
        weight = self._memo[memo_key] = max(per_name.values(), default=1)
        return weight


def weigh(
    fields: Sequence[FieldNode],
    fragments: Mapping[str, FragmentDefinitionNode],
    rows: Callable[[FieldNode], int] = lambda node: 1,
) -> int | None:
    """How many times what `fields` (the fields of one response key) select is rendered per
    row: a field asked under n response keys n times, a list field `rows(field)` times what
    it contains, down the tree; the most of any one field name per selection set (a row's
    distinct fields are bounded by its type). None when too complex to weigh."""
    children = tuple(n.selection_set for n in fields if n.selection_set is not None)
    if not children:
        return 1
    try:
        return _Weigher(fragments, rows).weight(children, 0)
    except _TooNested:
        return None


# -- the limits -----------------------------------------------------------------------------


class LimitSettings(Protocol):
    """The part of a server's config the limits read (GatewayConfig, NodeConfig)."""

    @property
    def max_depth(self) -> int: ...

    @property
    def max_aliases(self) -> int: ...

    @property
    def max_cost(self) -> int: ...

    @property
    def introspection(self) -> bool: ...


@dataclass(frozen=True)
class Limits:
    """The limits one server applies, and the variables that set them (by field name:
    max_depth, max_aliases, max_cost, introspection); `server` names it in messages."""

    max_depth: int
    max_aliases: int
    max_cost: int
    introspection: bool
    variables: Mapping[str, str]
    server: str
    # root fields that print the schema too, refused with introspection (the gateway's
    # `_service`; a node's stays open to the routers that compose from it)
    schema_roots: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        config: LimitSettings,
        env: Mapping[str, str],
        server: str,
        schema_roots: Iterable[str] = (),
    ) -> Limits:
        """The limits of a server's config, named in messages by the variables `env` maps
        its fields to (the config's `ENV`)."""
        names = ("max_depth", "max_aliases", "max_cost", "introspection")
        return cls(
            max_depth=config.max_depth,
            max_aliases=config.max_aliases,
            max_cost=config.max_cost,
            introspection=config.introspection,
            variables={name: env[name] for name in names},
            server=server,
            schema_roots=frozenset(schema_roots),
        )

    def _schema_roots_of(self, measure: Measure) -> list[FieldNode]:
        """The root fields of `measure` that print the schema (`schema_roots`)."""
        return [
            node
            for nodes in measure.roots.values()
            for node in nodes
            if node.name.value in self.schema_roots
        ]

    def refusals(self, measure: Measure) -> list[GraphQLError]:
        """One error per limit of depth, aliases and introspection `measure` exceeds."""
        refused: list[GraphQLError] = []
        if not self.introspection:
            shown = [*measure.introspection, *self._schema_roots_of(measure)]
            if shown:
                error = IntrospectionDisabledError(
                    self.variables["introspection"], self.server, self.schema_roots
                )
                refused.append(error.graphql(shown))
        if measure.depth > self.max_depth:
            depth = "more than 200" if measure.too_nested else str(measure.depth)
            too_deep = QueryTooDeepError(
                f"the query nests fields {depth} levels deep, at most {self.max_depth}",
                actual=measure.depth,
                limit=self.max_depth,
                variable=self.variables["max_depth"],
            )
            refused.append(too_deep.graphql(() if measure.deepest is None else [measure.deepest]))
        if measure.aliases > self.max_aliases:
            too_many = TooManyAliasesError(
                f"the query has {measure.aliases} aliases and repeated fields, at most "
                f"{self.max_aliases} (each counted per fragment spread)",
                actual=measure.aliases,
                limit=self.max_aliases,
                variable=self.variables["max_aliases"],
            )
            refused.append(too_many.graphql())
        return refused

    def too_costly(
        self, total: int | None, costs: Sequence[tuple[str, int]], how: str
    ) -> GraphQLError | None:
        """The error refusing a query of cost `total` (None: too complex to price) made of
        `costs` (label, cost), naming the dearest; None within the limit. `how` says what
        fields cost."""
        if total is not None and total <= self.max_cost:
            return None
        dearest = sorted(costs, key=lambda lc: -lc[1])[:3]
        parts = ", ".join(f"{label} {cost}" for label, cost in dearest)
        more = f" and {len(costs) - 3} more fields" if len(costs) > 3 else ""
        actual = "more than can be priced" if total is None else str(total)
        error = QueryTooCostlyError(
            f"the query costs {actual}, at most {self.max_cost} ({how}; a field asked under "
            f"several aliases costs as often): {parts}{more}",
            actual=self.max_cost + 1 if total is None else total,
            limit=self.max_cost,
            variable=self.variables["max_cost"],
        )
        return error.graphql()


# -- sizes asked by arguments ---------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """The size one argument of a field asks for: a literal, or a variable's value (its
    default when the request gives none)."""

    literal: int
    variable: str | None = None
    variable_default: Any = None

    def of(self, variables: Mapping[str, Any] | None) -> int:
        if self.variable is None:
            return self.literal
        given = (variables or {}).get(self.variable, self.variable_default)
        return size_of(given)

    @classmethod
    def argument(
        cls, node: FieldNode, argument: str, schema_default: Any, defaults: Mapping[str, Any]
    ) -> Size | None:
        """The size `argument` of `node` asks for; the schema's default when it is not given,
        None when it has none."""
        given = next((a.value for a in node.arguments or () if a.name.value == argument), None)
        if isinstance(given, VariableNode):
            variable = given.name.value
            return cls(1, variable, defaults.get(variable))
        if given is not None:
            return cls(_literal(given))
        return None if schema_default is None else cls(size_of(schema_default))


def size_of(value: Any) -> int:
    """The size a value asks for: a list's length, an integer itself (a whole float too, as
    `1e4` or `10000.0` in JSON variables, which GraphQL's Int takes), else 1 (null, or a value
    the schema will refuse with BAD_USER_INPUT anyway)."""
    if isinstance(value, list | tuple):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 1


def _literal(node: ValueNode) -> int:
    if isinstance(node, IntValueNode):
        return int(node.value)
    if isinstance(node, ListValueNode):
        return len(node.values)
    return 1
