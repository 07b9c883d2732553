"""A request's variables and a field's arguments bound as graphql-core binds them
(`get_variable_values`, `get_argument_values`), without its general machinery where the
operation is simple; the fast path binds here (`gateway.execute.asked`), execution its own way.

Variables: when every declaration is `String`, `Int`, a non-null one or a list of non-null
ones, with no default value, a value graphql-core would keep as it is (a `str` for a
String, an `int` within 32 bits for an Int, a JSON list of those) is taken as it is; any
other (missing where required, of another type, a lone value for a list) goes through
graphql-core, which coerces it or says why not.

Arguments: when each is a literal without variables (coerced once) or a variable, and the
field's other arguments have no default, a variable's value is taken as graphql-core takes
it (left out when not given, refused when null or missing where required); any other
argument list is bound by graphql-core per request.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    GRAPHQL_MAX_INT,
    GRAPHQL_MIN_INT,
    FieldNode,
    GraphQLArgument,
    GraphQLError,
    GraphQLField,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLSchema,
    GraphQLString,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    TypeNode,
    Undefined,
    VariableDefinitionNode,
    VariableNode,
    coerce_input_literal,
    get_argument_values,
    get_variable_values,
)
from graphql.execution.values import VariableValues
from graphql.language import ListValueNode, ObjectValueNode, ValueNode


class Unbound(Exception):
    """The arguments do not bind as they are: graphql-core's execution says why."""


__all__ = ["Arguments", "Unbound", "Variables"]


def _string(value: Any) -> bool:
    return type(value) is str


def _int(value: Any) -> bool:
    return type(value) is int and GRAPHQL_MIN_INT <= value <= GRAPHQL_MAX_INT


_SCALARS = {"String": (GraphQLString, _string), "Int": (GraphQLInt, _int)}


@dataclass(frozen=True, slots=True)
class _Declared:
    """A simple declaration: the values kept as they are, and whether null is refused."""

    name: str
    keeps: Callable[[Any], bool]
    non_null: bool


class Variables:
    """Binds the variables of `definitions` (one operation's) against `schema`."""

    def __init__(
        self, schema: GraphQLSchema, definitions: Collection[VariableDefinitionNode]
    ) -> None:
        self._schema = schema
        self._definitions = definitions
        self._simple = _simple(schema, definitions)

    def bind(self, given: Mapping[str, Any] | None) -> VariableValues | None:
        """The coerced values of `given`, or None when they do not coerce (execution then
        reports why)."""
        if self._simple is not None:
            coerced = _kept(self._simple, given or {})
            if coerced is not None:
                return VariableValues({}, coerced)
        bound = get_variable_values(self._schema, self._definitions, dict(given or {}))
        return None if isinstance(bound, list) else bound


def _simple(
    schema: GraphQLSchema, definitions: Collection[VariableDefinitionNode]
) -> tuple[_Declared, ...] | None:
    declared = []
    for definition in definitions:
        keeps = None if definition.default_value else _keeps(schema, definition.type)
        if keeps is None:
            return None
        non_null = isinstance(definition.type, NonNullTypeNode)
        declared.append(_Declared(definition.variable.name.value, keeps, non_null))
    return tuple(declared)


def _keeps(schema: GraphQLSchema, node: TypeNode) -> Callable[[Any], bool] | None:
    """What a simple declared type keeps as it is; None for any other type."""
    if isinstance(node, NonNullTypeNode):
        node = node.type
    if isinstance(node, ListTypeNode):
        item = node.type
        if not isinstance(item, NonNullTypeNode):
            return None
        keeps = _scalar(schema, item.type)
        if keeps is None:
            return None
        return lambda value: type(value) is list and all(keeps(v) for v in value)
    return _scalar(schema, node)


def _scalar(schema: GraphQLSchema, node: TypeNode) -> Callable[[Any], bool] | None:
    if not isinstance(node, NamedTypeNode):
        return None
    known = _SCALARS.get(node.name.value)
    if known is None or schema.get_type(node.name.value) is not known[0]:
        return None
    return known[1]


def _kept(declared: tuple[_Declared, ...], given: Mapping[str, Any]) -> dict[str, Any] | None:
    """The values graphql-core would keep as given, or None for it to decide."""
    coerced: dict[str, Any] = {}
    for variable in declared:
        name = variable.name
        if name not in given:
            if variable.non_null:
                return None
            continue  # a nullable variable not given is left out
        value = given[name]
        if value is None:
            if variable.non_null:
                return None
        elif not variable.keeps(value):
            return None
        coerced[name] = value
    return coerced


@dataclass(frozen=True, slots=True)
class _Given:
    """An argument given as variable `variable`, else as the literal `value`."""

    name: str
    variable: str | None
    value: Any
    required: bool  # non-null: a variable not given, or null, does not bind


class Arguments:
    """Binds the arguments of `node`, a use of `field`."""

    def __init__(self, field: GraphQLField, node: FieldNode) -> None:
        self._field = field
        self._node = node
        self._given = _given(field, node)

    def bind(self, variables: VariableValues) -> dict[str, Any]:
        """The coerced arguments; Unbound when they do not bind."""
        if self._given is None:
            try:
                return get_argument_values(self._field, self._node, variables)
            except GraphQLError as exc:
                raise Unbound from exc
        coerced = variables.coerced
        arguments: dict[str, Any] = {}
        for given in self._given:
            if given.variable is None:
                arguments[given.name] = given.value
                continue
            value = coerced.get(given.variable, Undefined)
            if value is Undefined or value is None:
                if given.required:
                    raise Unbound
                if value is Undefined:
                    continue  # as if the argument was not given
            arguments[given.name] = value
        return arguments


def _given(field: GraphQLField, node: FieldNode) -> tuple[_Given, ...] | None:
    """How each argument of `node` binds, when each is a variable or a literal without
    variables and none has a default; else None."""
    nodes = {argument.name.value: argument.value for argument in node.arguments or ()}
    given = []
    for name, definition in field.args.items():
        value = nodes.get(name)
        if definition.default_value is not Undefined or (
            value is not None and _has_variable(value) and not isinstance(value, VariableNode)
        ):
            return None
        if value is None:
            continue  # left out, as graphql-core leaves it
        out = definition.out_name or name
        required = isinstance(definition.type, GraphQLNonNull)
        if isinstance(value, VariableNode):
            given.append(_Given(out, value.name.value, None, required))
        else:
            try:
                given.append(_Given(out, None, _literal(value, definition), required))
            except Unbound:
                return None
    return tuple(given)


def _has_variable(value: ValueNode) -> bool:
    """Whether `value` holds a variable anywhere: in a list, or a field of an object."""
    if isinstance(value, VariableNode):
        return True
    if isinstance(value, ListValueNode):
        return any(_has_variable(v) for v in value.values)
    return isinstance(value, ObjectValueNode) and any(_has_variable(f.value) for f in value.fields)


def _literal(value: ValueNode, definition: GraphQLArgument) -> Any:
    """A literal argument coerced as graphql-core coerces it; Unbound when it does not."""
    coerced = coerce_input_literal(value, definition.type)
    if coerced is Undefined:
        raise Unbound
    return coerced
