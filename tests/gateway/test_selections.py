"""The fields a selection set asks, fragments spread (gateway.execute.selections): where
`fields_of` gives them, they are the response keys graphql-core's execution answers, in
its order; what needs graphql-core's merging is None."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import OperationDefinitionNode, build_schema, execute_sync, parse, validate
from hypothesis import assume, given
from hypothesis import strategies as st

from gateway.execute.selections import fields_of, fragments_of
from gateway.execute.writer import response_key

_SCHEMA = build_schema(
    """
    type Query { a: Int  b: Int  c: Int }
    type Other { a: Int }
    union Both = Query | Other
    """
)
_ROOT = {"a": 1, "b": 2, "c": 3}


def _keys(document: str) -> tuple[list[str] | None, list[str]]:
    """What `fields_of` makes of the document's operation, and the keys execution answers."""
    ast = parse(document)
    assert not validate(_SCHEMA, ast), document
    operation = next(d for d in ast.definitions if isinstance(d, OperationDefinitionNode))
    fields = fields_of(operation.selection_set.selections, fragments_of(ast.definitions), "Query")
    result = execute_sync(_SCHEMA, ast, root_value=_ROOT)
    assert result.errors is None and result.data is not None
    return None if fields is None else [response_key(f) for f in fields], list(result.data)


@st.composite
def _selections(draw: st.DrawFn, fragments: dict[str, str], depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "field", "inline", "untyped", "named"]))
        if kind == "field" or depth >= 2:
            alias = draw(st.sampled_from(["", "x: ", "y: "]))
            parts.append(alias + draw(st.sampled_from(["a", "b", "c", "__typename"])))
            continue
        inner = draw(_selections(fragments, depth + 1))
        if kind == "inline":
            parts.append(f"... on Query {{ {inner} }}")
        elif kind == "untyped":
            parts.append(f"... {{ {inner} }}")
        else:
            name = f"F{len(fragments)}"
            fragments[name] = f"fragment {name} on Query {{ {inner} }}"
            parts.append(f"...{name}")
    return " ".join(parts)


@st.composite
def _documents(draw: st.DrawFn) -> str:
    fragments: dict[str, str] = {}
    body = draw(_selections(fragments))
    return f"{{ {body} }} " + " ".join(fragments.values())


@given(document=_documents())
def test_the_fields_are_the_keys_execution_answers_in_its_order(document: str) -> None:
    assume(not validate(_SCHEMA, parse(document)))  # one alias of two fields is no document
    fields, executed = _keys(document)
    if fields is not None:
        assert fields == executed
    else:  # only a response key asked twice leaves it to graphql-core's merging
        ast = parse(document)
        operation = ast.definitions[0]
        assert isinstance(operation, OperationDefinitionNode)
        assert len(executed) < _count_fields(operation.selection_set.selections, ast)


def _count_fields(selections: Any, ast: Any) -> int:
    fragments = fragments_of(ast.definitions)
    total = 0
    for selection in selections:
        if selection.kind == "field":
            total += 1
        elif selection.kind == "inline_fragment":
            total += _count_fields(selection.selection_set.selections, ast)
        else:
            total += _count_fields(fragments[selection.name.value].selection_set.selections, ast)
    return total


@pytest.mark.parametrize(
    "document",
    [
        "{ ... on Both { __typename } }",  # on a union the type is one of
        "{ ...U } fragment U on Both { __typename }",
        "{ a ... on Query @include(if: true) { b } }",
        "{ a ...F @skip(if: false) } fragment F on Query { b }",
        "{ a ...F } fragment F on Query @include(if: true) { b }",  # not allowed there
        "{ a b @include(if: true) }",
        "{ ...F ...F } fragment F on Query { a }",  # spread once by graphql-core
        "{ a ... { a } }",
    ],
)
def test_what_needs_graphql_cores_merging_or_directives_is_none(document: str) -> None:
    ast = parse(document)
    operation = ast.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    fragments = fragments_of(ast.definitions)
    assert fields_of(operation.selection_set.selections, fragments, "Query") is None


def test_fragments_nested_in_fragments_are_spread_in_order() -> None:
    document = "{ c ... { ...F } x: a } fragment F on Query { ... on Query { b } }"
    assert _keys(document) == (["c", "b", "x"], ["c", "b", "x"])
