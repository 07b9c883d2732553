"""The gateway's query limits: depth, aliases, root fields, fan-out cost and introspection,
decided on the parsed document before it is validated and before any node is asked.

The measures are the shared ones (`runtime.graphql_http.limits`: depth, aliases and repeated
fields per fragment spread, the weight of what a field selects); what the gateway adds is the
price of its root fields. A document's shape is computed once per (document, operation) and
kept with the cached document; its cost is evaluated per request, since `limit`, `first` and
key lists may come in variables. A root field's price is what the nodes must read: a top-N
(of one window, for windowed views) reads every partition, P x limit; a page of a whole-view
scan P x `first` (or `last`), whatever its cursor, as every partition reads its slice from
its own position; a multi-key lookup its
keys (`_entities` its representations); a history page `first`; a key's windows as many as
the view's retention keeps; any other field 1 (each kind prices its fields, `gateway.api.kinds`).
The price is multiplied by the weight of the field's selection: what it selects under n
aliases is rendered n times, so `bookingHistory(first: 1000)` with 10 x 10 x 10 aliased
fields costs 10^6. A size outside its argument's bounds is clamped here, so the resolver
reports it as BAD_USER_INPUT instead; but a list of keys or representations in a variable
longer than its bound is refused here with the resolver's own error, before coercing the
variables would check each of its values. An operation whose sizes are all literals or defaults
and whose fields do not fan out costs the same for any variables and any routing table: when
it is within every limit, that verdict is kept with its shape (`Shape.settled`) and a
request checks nothing (most point and multi-key lookups).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    Undefined,
)

from gateway.api.kinds import kind_of
from gateway.config import GatewayConfig
from gateway.model.errors import GatewayError, TooManyRootFieldsError
from gateway.model.inputs import too_many_keys, too_many_representations
from gateway.model.prices import ONE, Price
from runtime.graphql_http.limits import Limits, Measure, Size, measure, weigh
from schema import View

__all__ = ["QueryLimits", "Shape"]

_HOW = (
    "a top-N costs partitions x limit, a scan page partitions x first (or last), a lookup "
    "its keys, a history page `first`"
)


@dataclass(frozen=True)
class _Term:
    """A root field of the operation (fields of one response key run once, however often
    fragments repeat them), the size it asks for and the weight of what it selects."""

    node: FieldNode
    price: Price
    size: Size
    weight: int | None  # None: too complex to weigh

    @property
    def label(self) -> str:
        name = self.node.name.value
        return name if self.node.alias is None else f"{self.node.alias.value}: {name}"


@dataclass(frozen=True)
class Shape:
    """What the limits need to know of one operation of a document."""

    measure: Measure
    terms: tuple[_Term, ...]  # one per root response key, __typename left out
    settled: bool = False  # within every limit whatever the variables and routing

    @property
    def fixed(self) -> bool:
        """Whether no cost can depend on variables (a size in one) or on P (a fan-out)."""
        return all(t.size.variable is None and not t.price.fanout for t in self.terms)

    @property
    def root_fields(self) -> int:
        return len(self.terms)


class QueryLimits:
    """The limits of `config` over the schema of `catalogue`."""

    def __init__(
        self, config: GatewayConfig, schema: GraphQLSchema, catalogue: Iterable[View]
    ) -> None:
        self._config = config
        self._schema = schema
        self._prices = _prices(config, catalogue)
        # `_service { sdl }` prints the whole schema: hidden with introspection
        self._limits = Limits.of(config, GatewayConfig.ENV, "gateway", schema_roots=("_service",))

    def analyze(self, document: DocumentNode, operation: OperationDefinitionNode) -> Shape:
        """The shape of one operation of a parsed (not yet validated) document."""
        measured = measure(document, operation)
        if measured.too_nested or measured.depth > self._config.max_depth:
            return Shape(measured, ())  # refused for its depth: weigh nothing deeper
        terms = tuple(self._term(nodes, measured) for nodes in measured.roots.values() if nodes)
        shape = Shape(measured, terms)
        if shape.fixed and not self.check_shape(shape, None, _unread):
            return Shape(measured, terms, settled=True)
        return shape

    def check_shape(
        self,
        shape: Shape,
        variables: Mapping[str, Any] | None,
        partitions: Callable[[View], int],
    ) -> list[GraphQLError]:
        """One error per limit the operation exceeds."""
        if shape.settled:
            return []
        refused = self._limits.refusals(shape.measure)
        if refused and shape.measure.depth > self._config.max_depth:
            return refused
        if shape.root_fields > self._config.max_root_fields:
            refused.append(_too_many_roots(shape.root_fields, self._config.max_root_fields))
        refused.extend(e for t in shape.terms if (e := _too_long(t, variables)) is not None)
        costs = [(t.label, _cost(t, variables, partitions)) for t in shape.terms]
        total: int | None = sum(c for _, c in costs)
        if any(t.weight is None for t in shape.terms):
            total = None
        too_costly = self._limits.too_costly(total, costs, _HOW)
        if too_costly is not None:
            refused.append(too_costly)
        return refused

    def _term(self, nodes: tuple[FieldNode, ...], measured: Measure) -> _Term:
        node = nodes[0]
        name = node.name.value
        price = self._prices.get(name, ONE)
        size = Size(price.fixed)
        if price.argument is not None:
            default = self._schema_default(name, price.argument)
            given = Size.argument(node, price.argument, default, measured.defaults)
            size = given or Size(price.fixed)
        if price.alternative is not None:
            other = Size.argument(node, price.alternative, None, measured.defaults)
            size = size if other is None else other
        return _Term(node, price, size, weigh(nodes, measured.fragments))

    def _schema_default(self, field_name: str, argument: str) -> Any:
        query = self._schema.query_type
        definition = query.fields.get(field_name) if query is not None else None
        spec = definition.args.get(argument) if definition is not None else None
        # an argument without a default has `Undefined` as its default value
        return None if spec is None or spec.default_value is Undefined else spec.default_value


def _cost(
    term: _Term, variables: Mapping[str, Any] | None, partitions: Callable[[View], int]
) -> int:
    price = term.price
    size = term.size.of(variables)
    size = max(size, 1) if price.bound is None else min(max(size, 1), price.bound)
    width = partitions(price.view) if price.fanout and price.view is not None else 1
    return width * size * (term.weight or 1)


def _too_long(term: _Term, variables: Mapping[str, Any] | None) -> GraphQLError | None:
    """The resolver's own error for a list of keys (or representations) given in a variable
    and longer than its bound, raised before the request's variables are coerced: coercing
    checks every value of the list (a list of 200,000 keys kept the event loop for 0.3 s)."""
    price, size = term.price, term.size
    if price.bound is None or size.variable is None:
        return None
    given = (variables or {}).get(size.variable)
    if not isinstance(given, list) or len(given) <= price.bound:
        return None
    if price.view is None:  # `_entities`
        error: GatewayError = too_many_representations(len(given), price.bound)
    elif price.argument == price.view.keys_arg:
        error = too_many_keys(price.view, price.bound)
    else:
        return None
    return GraphQLError(str(error), [term.node], original_error=error)


def _unread(view: View) -> int:
    raise AssertionError(f"a fixed shape read the partition count of {view.name}")


def _prices(config: GatewayConfig, catalogue: Iterable[View]) -> dict[str, Price]:
    """The price of every root field that reads more than one row or partition."""
    # federation's batch lookup: each representation is a point lookup
    prices = {
        "_entities": Price(argument="representations", bound=config.max_entity_representations)
    }
    for view in catalogue:
        prices.update(kind_of(view).prices(view, config))
    return prices


def _too_many_roots(actual: int, limit: int) -> GraphQLError:
    return TooManyRootFieldsError(
        f"the query asks for {actual} root fields, at most {limit}: split it into several requests",
        actual=actual,
        limit=limit,
        variable=GatewayConfig.ENV["max_root_fields"],
    ).graphql()
