"""Apollo Client's possibleTypes map: every union and interface with its object types,
read from the schema object."""

from __future__ import annotations

import orjson
from graphql import build_schema

from gateway.api.schema import build_schema as build_gateway_schema
from gateway.api.schema import entities_of
from gateway.execute.possibletypes import possible_types, print_possible_types


def test_unions_and_interfaces_map_to_their_object_types() -> None:
    schema = build_schema(
        """
        interface Named { name: String }
        interface Aged { age: Int }
        type Dog implements Named & Aged { name: String, age: Int }
        type Cat implements Named { name: String }
        type Rock { weight: Int }
        union Thing = Rock | Dog
        type Query { named: Named, aged: Aged, thing: Thing }
        """
    )
    assert possible_types(schema) == {
        "Aged": ["Dog"],
        "Named": ["Cat", "Dog"],
        "Thing": ["Dog", "Rock"],
    }


def test_the_gateways_map_holds_its_entities() -> None:
    schema = build_gateway_schema()
    found = orjson.loads(print_possible_types())
    assert found == {"_Entity": sorted(entities_of(schema))}
    assert found == possible_types(schema._schema)
