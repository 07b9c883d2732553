"""The fast path's plans (gateway.execute.plans): a lookup's leaves read the entity's values
of a row, without making its object, only where that reads what execution reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import strawberry
from graphql import GraphQLNonNull, GraphQLObjectType, GraphQLScalarType, OperationDefinitionNode
from graphql import parse as parse_document
from strawberry.schema.config import StrawberryConfig

from gateway.api.fields import Entity
from gateway.api.fields.common import object_type
from gateway.api.schema import build_schema, entities_of
from gateway.execute import plans as plans_module
from gateway.execute.plans import Leaf, Plans
from gateway.execute.selections import fragments_of
from gateway.model.rows import Event, Row
from schema import CATALOGUE, WORD_COUNTS, KeyType, View, ViewKind
from schema.recordkeys import RecordKey
from tests.differential.views import CATALOGUE as TYPED_CATALOGUE

pytestmark = pytest.mark.unit


def test_a_lookups_leaves_read_the_values_its_object_is_made_of() -> None:
    schema = build_schema(CATALOGUE)
    document = parse_document('{ wordCounts(words: ["a"]) { n: count word __typename } }')
    operation = document.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    plan = Plans(schema, CATALOGUE)._derive(operation, fragments_of(document.definitions), {})
    assert plan is not None
    root = plan.roots[0]
    assert root.values is not None
    row = Row("a", 3)
    values = root.values(row)
    assert values == {"word": "a", "count": 3}
    _assert_resolvers_read(root.leaves, entities_of(schema)[WORD_COUNTS.type_name], row)


def _found(view: View) -> Row | Event:
    """A row a lookup of `view` could find, its key of the view's key type."""
    key_type = view.key_type
    if isinstance(key_type, RecordKey):
        key = key_type.text({"shop": "s", "seq": 2**53 + 1, "lane": 3})
    else:
        given = {KeyType.INT: -7, KeyType.LONG: 2**53 + 1, KeyType.DOUBLE: 1.5}
        key = key_type.text(given.get(key_type, "ké"))
    if view.kind is ViewKind.COUNT:
        return Row(key, 4)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Event(key, at, {field.name: None for field in view.value_fields})


ENTITY_VIEWS = [view for view in TYPED_CATALOGUE if view.kind in (ViewKind.COUNT, ViewKind.LATEST)]


@pytest.mark.parametrize("view", ENTITY_VIEWS, ids=lambda view: view.name)
def test_every_entitys_leaves_read_from_its_values_what_its_resolvers_read(view: View) -> None:
    schema = build_schema(TYPED_CATALOGUE)
    entity = entities_of(schema)[view.type_name]
    graphql_type = schema._schema.get_type(view.type_name)
    assert isinstance(graphql_type, GraphQLObjectType)
    scalars = [
        name
        for name, field in graphql_type.fields.items()
        if isinstance(_unwrapped(field.type), GraphQLScalarType) and not field.args
    ]
    leaves = _leaves(graphql_type, *scalars)
    assert plans_module._values_reader(entity, graphql_type, leaves) is entity.values
    _assert_resolvers_read(leaves, entity, _found(view))


def _unwrapped(output: Any) -> Any:
    return output.of_type if isinstance(output, GraphQLNonNull) else output


def _assert_resolvers_read(leaves: tuple[Leaf, ...], entity: Entity, row: Row | Event) -> None:
    made, values = entity.convert(row), entity.values(row)
    for leaf in leaves:
        if leaf.resolve is not None:
            assert leaf.resolve(made, None) == values[leaf.name], leaf.name


def _graphql_type(cls: Any, config: StrawberryConfig | None = None) -> GraphQLObjectType:
    query = strawberry.type(type("Query", (), {"__annotations__": {"one": cls}}))
    schema = strawberry.Schema(query=query, config=config)
    graphql_type = schema._schema.get_type(cls.__strawberry_definition__.name)
    assert isinstance(graphql_type, GraphQLObjectType)
    return graphql_type


def _leaves(graphql_type: GraphQLObjectType, *names: str) -> tuple[Leaf, ...]:
    fields = graphql_type.fields
    return tuple(Leaf(name, fields[name].resolve, str, True, name) for name in names)


def _counted() -> Any:
    return object_type(WORD_COUNTS, "Counted", "", [("word", str, None), ("count", int, None)])


def _entity(cls: Any) -> Entity:
    return Entity(WORD_COUNTS, cls, lambda row: {"word": row.key, "count": row.count})


def test_values_are_read_for_a_type_made_by_object_type() -> None:
    cls = _counted()
    entity = _entity(cls)
    graphql_type = _graphql_type(cls)
    leaves = _leaves(graphql_type, "word", "count")
    assert plans_module._values_reader(entity, graphql_type, leaves) is entity.values


@strawberry.type
class _Renamed:
    f_word: str = strawberry.field(name="word")  # where `make` puts it
    total_count: int = strawberry.field(name="count")  # not where `make` puts it


def test_a_field_held_under_another_attribute_makes_the_object() -> None:
    entity = _entity(_Renamed)
    graphql_type = _graphql_type(_Renamed)
    word, both = _leaves(graphql_type, "word"), _leaves(graphql_type, "word", "count")
    assert plans_module._values_reader(entity, graphql_type, word) is entity.values
    assert plans_module._values_reader(entity, graphql_type, both) is None


@strawberry.type
class _Resolved:
    f_word: str = strawberry.field(name="word")

    @strawberry.field(name="count")
    def f_count(self) -> int:
        return 1


def test_a_field_with_a_resolver_of_its_own_makes_the_object() -> None:
    entity = _entity(_Resolved)
    graphql_type = _graphql_type(_Resolved)
    assert plans_module._values_reader(entity, graphql_type, _leaves(graphql_type, "word"))
    count = _leaves(graphql_type, "word", "count")
    assert plans_module._values_reader(entity, graphql_type, count) is None


def test_a_schema_reading_attributes_its_own_way_makes_the_object() -> None:
    cls = _counted()
    entity = _entity(cls)
    plain = _graphql_type(cls)
    assert plans_module._values_reader(entity, plain, _leaves(plain, "count")) is entity.values
    own_way = _graphql_type(cls, StrawberryConfig(default_resolver=lambda obj, name: 0))
    assert plans_module._values_reader(entity, own_way, _leaves(own_way, "count")) is None
