"""Binding a field's arguments for the fast path (gateway.execute.binding): a variable
anywhere inside a literal is bound per request, never coerced once as missing."""

from __future__ import annotations

from graphql import (
    GraphQLArgument,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLList,
    GraphQLString,
    parse,
)
from graphql.execution.values import VariableValues
from graphql.language import FieldNode, OperationDefinitionNode

from gateway.execute.binding import Arguments

NAMED = GraphQLInputObjectType(
    "Named", {"name": GraphQLInputField(GraphQLString), "note": GraphQLInputField(GraphQLString)}
)
FIELD = GraphQLField(GraphQLString, {"items": GraphQLArgument(GraphQLList(NAMED))})


def _field(document: str) -> FieldNode:
    operation = parse(document).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    node = operation.selection_set.selections[0]
    assert isinstance(node, FieldNode)
    return node


def test_a_variable_inside_an_object_literal_is_bound_per_request() -> None:
    node = _field('query($w: String) { f(items: [{name: $w, note: "n"}]) }')
    arguments = Arguments(FIELD, node)
    for word in ("kafka", "franz"):
        bound = arguments.bind(VariableValues({}, {"w": word}))
        assert bound == {"items": [{"name": word, "note": "n"}]}


def test_a_literal_without_variables_binds_once() -> None:
    node = _field('{ f(items: [{name: "kafka"}]) }')
    assert Arguments(FIELD, node).bind(VariableValues({}, {})) == {"items": [{"name": "kafka"}]}
