"""The fast path's plans (gateway.execute.plans): a lookup's leaves read the entity's values
of a row, without making its object, only where that reads what execution reads."""

from __future__ import annotations

from typing import Any

import pytest
import strawberry
from graphql import GraphQLObjectType, OperationDefinitionNode, parse

from gateway.api.fields.common import Entity, make, object_type
from gateway.api.schema import build_schema, entities_of
from gateway.execute import plans as plans_module
from gateway.execute.plans import Plans
from gateway.execute.selections import fragments_of
from gateway.model.rows import Row
from schema import CATALOGUE, WORD_COUNTS, View

pytestmark = pytest.mark.unit


def test_a_lookups_leaves_read_the_values_its_object_is_made_of() -> None:
    schema = build_schema(CATALOGUE)
    document = parse('{ wordCounts(words: ["a"]) { n: count word __typename } }')
    operation = document.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    plan = Plans(schema, CATALOGUE)._derive(operation, fragments_of(document.definitions), {})
    assert plan is not None
    root = plan.roots[0]
    entity = entities_of(schema)[WORD_COUNTS.type_name]
    assert root.values is not None
    row = Row("a", 3)
    values = root.values(row)
    assert values == entity.values(row) == {"word": "a", "count": 3}
    made = entity.convert(row)
    for leaf in root.leaves:
        if leaf.resolve is not None:
            assert leaf.resolve(made, None) == values[leaf.name]


def _graphql_type(cls: Any) -> GraphQLObjectType:
    query = strawberry.type(type("Query", (), {"__annotations__": {"one": cls}}))
    schema = strawberry.Schema(query=query)
    graphql_type = schema._schema.get_type(cls.__strawberry_definition__.name)
    assert isinstance(graphql_type, GraphQLObjectType)
    return graphql_type


def _leaves(graphql_type: GraphQLObjectType, *names: str) -> tuple[plans_module.Leaf, ...]:
    fields = graphql_type.fields
    return tuple(plans_module.Leaf(name, fields[name].resolve, str, True, name) for name in names)


def test_values_are_read_for_a_type_made_by_object_type() -> None:
    view: View = WORD_COUNTS
    cls = object_type(view, "Counted", "", [("word", str, None), ("count", int, None)])
    entity = Entity(view, cls, lambda row: {"word": row.key, "count": row.count})
    graphql_type = _graphql_type(cls)
    assert plans_module._values(entity, graphql_type, _leaves(graphql_type, "count")) is (
        entity.values
    )
    assert make(cls, {"word": "a", "count": 1}).f_count == 1


def test_a_field_held_under_another_attribute_makes_the_object() -> None:
    @strawberry.type
    class Renamed:
        word: str
        total_count: int = strawberry.field(name="count")

    view: View = WORD_COUNTS
    entity = Entity(view, Renamed, lambda row: {"word": row.key, "count": row.count})
    graphql_type = _graphql_type(Renamed)
    leaves = _leaves(graphql_type, "word", "count")
    assert plans_module._values(entity, graphql_type, leaves) is None
