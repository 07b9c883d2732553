"""runtime.plainfields: which strawberry fields execution reads with getattr."""

from __future__ import annotations

from typing import Any

import pytest
import strawberry
from graphql import GraphQLObjectType
from strawberry.permission import BasePermission
from strawberry.schema.config import StrawberryConfig

from runtime.plainfields import plain_attribute

pytestmark = pytest.mark.unit


class _Nobody(BasePermission):
    message = "nobody"

    def has_permission(self, source: Any, info: Any, **kwargs: Any) -> bool:
        return False


def _fields(config: StrawberryConfig | None = None) -> GraphQLObjectType:
    @strawberry.type
    class Item:
        plain: int
        held: int = strawberry.field(name="renamed")
        guarded: int = strawberry.field(permission_classes=[_Nobody])

        @strawberry.field
        def resolved(self) -> int:
            return 1

    query = strawberry.type(type("Query", (), {"__annotations__": {"item": Item}}))
    schema = strawberry.Schema(query=query, config=config)
    graphql_type = schema._schema.get_type("Item")
    assert isinstance(graphql_type, GraphQLObjectType)
    return graphql_type


def test_a_plain_field_is_read_from_its_python_attribute() -> None:
    fields = _fields().fields
    assert plain_attribute(fields["plain"]) == "plain"
    assert plain_attribute(fields["renamed"]) == "held"


def test_a_resolver_or_a_permission_of_its_own_is_no_plain_attribute() -> None:
    fields = _fields().fields
    assert plain_attribute(fields["resolved"]) is None
    assert plain_attribute(fields["guarded"]) is None


def test_a_schema_reading_attributes_its_own_way_has_no_plain_attribute() -> None:
    fields = _fields(StrawberryConfig(default_resolver=lambda obj, name: 0)).fields
    assert plain_attribute(fields["plain"]) is None
