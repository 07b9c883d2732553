"""The example operations of schema/operations: one named operation per file, valid against
the gateway schema of the full catalogue, with example variables that fit, and together
using every field role of every view kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphql import GraphQLError, GraphQLSchema, validate, validate_schema
from graphql.execution.values import get_variable_values

from gateway.api.schema import print_sdl
from schema import DEMO_DOMAIN, WORD_COUNTS, View
from tests.contract import OPERATIONS_DIR, Operation, camel, operations, shape_errors
from tooling.breaking import schema_of

FULL: tuple[View, ...] = (WORD_COUNTS, *DEMO_DOMAIN)
OPERATIONS = list(operations())
FULL_SCHEMA = schema_of(print_sdl(FULL))


def variable_problems(schema: GraphQLSchema, operation: Operation) -> list[str]:
    """Why the operation's example variables do not fit its variable definitions."""
    definitions = operation.definition.variable_definitions or ()
    declared = {d.variable.name.value for d in definitions}
    extra = sorted(set(operation.variables) - declared)
    problems = [f"variables not declared by the operation: {extra}"] if extra else []
    coerced = get_variable_values(schema, definitions, operation.variables)
    if isinstance(coerced, list):
        problems.extend(e.message for e in coerced)
    return problems


def test_there_are_operations_and_each_variables_file_has_its_operation() -> None:
    assert len(OPERATIONS) >= 9
    for path in OPERATIONS_DIR.glob("*.variables.json"):
        assert path.with_name(path.name.replace(".variables.json", ".graphql")).is_file(), path


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: o.path.stem)
def test_operation_is_named_after_its_file_and_valid(operation: Operation) -> None:
    assert operation.name == camel(operation.path.stem), (
        f"{operation.path.name} must hold exactly one operation, named {camel(operation.path.stem)}"
    )
    assert [e.message for e in validate(FULL_SCHEMA, operation.document)] == []
    assert variable_problems(FULL_SCHEMA, operation) == []


def test_the_operations_use_every_field_of_every_view_kind() -> None:
    """Every role a kind's view has (point, multi-key, top) is used on some view of that kind."""
    roles = {}
    for view in FULL:
        for role, field in (("point", view.point_field), ("many", view.many_field)):
            if field:
                roles[field] = (view.kind, role)
        if view.top_field:
            roles[view.top_field] = (view.kind, "top")
    needed = set(roles.values())
    used = {roles[f] for op in OPERATIONS for f in op.root_fields() if f in roles}
    assert needed - used == set()
    assert any("cluster" in op.root_fields() for op in OPERATIONS)
    assert any("_entities" in op.root_fields() for op in OPERATIONS)


def test_an_invalid_operation_or_bad_variables_are_found(tmp_path: Path) -> None:
    (tmp_path / "top_words.graphql").write_text(
        "query TopWords($limit: Int!) { topWords(limit: $limit) { word votes } }"
    )
    (tmp_path / "top_words.variables.json").write_text('{"limit": "three", "extra": 1}')
    (tmp_path / "two.graphql").write_text("query A { cluster { unassigned } } query B { x }")
    broken, two = sorted(operations(tmp_path), key=lambda o: o.path.name)
    assert [e.message for e in validate(FULL_SCHEMA, broken.document)] == [
        "Cannot query field 'votes' on type 'WordCount'."
    ]
    problems = variable_problems(FULL_SCHEMA, broken)
    assert problems[0] == "variables not declared by the operation: ['extra']"
    assert "Int cannot represent non-integer value: 'three'" in problems[1]
    assert two.name == ""


def test_the_shape_check_finds_what_the_schema_does_not_allow() -> None:
    (operation,) = [o for o in OPERATIONS if o.name == "WordCounts"]
    good = {"wordCounts": [{"word": "kafka", "count": 3}, None]}
    assert shape_errors(FULL_SCHEMA, operation, good, operation.variables) == []
    # graphql-core serializes "3" as 3: the typed copy differs from the data
    wrong_type = {"wordCounts": [{"word": "kafka", "count": "3"}]}
    (problem,) = shape_errors(FULL_SCHEMA, operation, wrong_type, operation.variables)
    assert problem.startswith("data differs from its typed copy")
    not_an_int = {"wordCounts": [{"word": "kafka", "count": "three"}]}
    (problem,) = shape_errors(FULL_SCHEMA, operation, not_an_int, operation.variables)
    assert "Int cannot represent non-integer value: 'three'" in problem
    missing = {"wordCounts": [{"word": "kafka"}]}
    assert shape_errors(FULL_SCHEMA, operation, missing, operation.variables) == [
        "wordCounts.0.count: Cannot return null for non-nullable field WordCount.count."
    ]
    extra = {"wordCounts": [{"word": "kafka", "count": 3, "votes": 1}]}
    assert len(shape_errors(FULL_SCHEMA, operation, extra, operation.variables)) == 1
    assert shape_errors(FULL_SCHEMA, operation, None, {}) == ["data is no object: None"]


def test_the_shape_check_reads_enums_unions_and_aliases() -> None:
    (cluster,) = [o for o in OPERATIONS if o.name == "Cluster"]
    data = {
        "cluster": {
            "routingVersion": 3,
            "partitionCount": 6,
            "nodes": [
                {
                    "id": "n1",
                    "url": "http://127.0.0.1:8101",
                    "state": "RUNNING",
                    "alive": True,
                    "heartbeatAgeMs": 12,
                    "active": [0, 1, 2],
                    "standby": [],
                }
            ],
            "partitions": [
                {
                    "partition": 0,
                    "node": "n1",
                    "role": "ACTIVE",
                    "appliedOffset": "5",
                    "endOffset": "5",
                    "lag": "0",
                }
            ],
            "unassigned": [3, 4, 5],
            "views": [
                {"name": "word_counts", "kind": "COUNT", "lateDropped": 0, "statusUpdatedAt": None}
            ],
        }
    }
    assert shape_errors(FULL_SCHEMA, cluster, data, {}) == []
    data["cluster"]["nodes"][0]["state"] = "ASLEEP"  # type: ignore[index]
    assert shape_errors(FULL_SCHEMA, cluster, data, {}) != []
    (entities,) = [o for o in OPERATIONS if o.name == "Entities"]
    found = {
        "_entities": [
            {"__typename": "WordCount", "word": "kafka", "count": 3},
            None,
            {"__typename": "LastBooking", "customer": "c1", "trip": None, "eventTime": "x"},
        ]
    }
    assert shape_errors(FULL_SCHEMA, entities, found, entities.variables) == []
    found["_entities"][0]["__typename"] = "HostAccess"  # type: ignore[index]
    assert shape_errors(FULL_SCHEMA, entities, found, entities.variables) != []


def test_the_full_catalogue_sdl_is_a_valid_schema() -> None:
    """The full catalogue's SDL builds into a valid schema (federation directives aside)."""
    errors: list[GraphQLError] = list(validate_schema(FULL_SCHEMA))
    assert errors == []
