"""The fields a selection set asks, fragments spread (on the type, or on a union it belongs
to) and `@skip`/`@include` decided (gateway.execute.selections, gateway.execute.conditions):
they are the response keys graphql-core's execution answers, in its order (a leaf asked
twice once); what needs graphql-core's merging of sub-selections, or is not decided, is
None."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import OperationDefinitionNode, build_schema, execute_sync, parse, validate
from hypothesis import assume, given
from hypothesis import strategies as st

from gateway.execute.conditions import MAX_CONDITIONS, conditional_nodes, decide
from gateway.execute.selections import collect, fragments_of, members_of, response_key

_SCHEMA = build_schema(
    """
    type Query { a: Int  b: Int  c: Int  t: T }
    type T { x: Int }
    type Other { a: Int }
    union Both = Query | Other
    """
)
_ROOT = {"a": 1, "b": 2, "c": 3}
_MEMBERS = members_of(_SCHEMA)


def _keys(
    document: str, variables: dict[str, Any] | None = None
) -> tuple[list[str] | None, list[str]]:
    """What `collect` makes of the document's operation (its conditions decided for
    `variables`; None when it has more than MAX_CONDITIONS), and the keys execution
    answers."""
    ast = parse(document)
    assert not validate(_SCHEMA, ast), document
    operation = next(d for d in ast.definitions if isinstance(d, OperationDefinitionNode))
    fragments = fragments_of(ast.definitions)
    result = execute_sync(_SCHEMA, ast, root_value=_ROOT, variable_values=variables)
    nodes = conditional_nodes(operation, fragments)
    if nodes is None:
        assert document.count("@") > MAX_CONDITIONS
        return None, list(result.data or {})
    outcomes = decide(nodes, operation, variables)
    assert outcomes is not None
    decided = {id(node): yes for node, yes in zip(nodes, outcomes, strict=True)}
    fields = collect(operation.selection_set.selections, fragments, "Query", decided, _MEMBERS)
    assert result.errors is None and result.data is not None
    return None if fields is None else [response_key(f) for f in fields], list(result.data)


_CONDITIONS = st.sampled_from(
    ["", "", "", "@skip(if: true)", "@skip(if: $b0)", "@include(if: $b1)", "@include(if: false)"]
)


@st.composite
def _selections(draw: st.DrawFn, fragments: dict[str, str], depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "field", "inline", "untyped", "named", "union"]))
        condition = draw(_CONDITIONS)
        if kind == "field" or depth >= 2:
            alias = draw(st.sampled_from(["", "x: ", "y: "]))
            parts.append(alias + draw(st.sampled_from(["a", "b", "c", "__typename"])) + condition)
            continue
        inner = draw(_selections(fragments, depth + 1))
        if kind == "inline":
            parts.append(f"... on Query {condition} {{ {inner} }}")
        elif kind == "union":  # Query is one of the union's types
            parts.append(f"... on Both {condition} {{ {inner} }}")
        elif kind == "untyped":
            parts.append(f"... {condition} {{ {inner} }}")
        else:
            name = f"F{len(fragments)}"
            fragments[name] = f"fragment {name} on Query {{ {inner} }}"
            parts.append(f"...{name} {condition}")
    return " ".join(parts)


@st.composite
def _documents(draw: st.DrawFn) -> str:
    fragments: dict[str, str] = {}
    body = draw(_selections(fragments))
    variables = "($b0: Boolean!, $b1: Boolean = false)" if "$b" in body else ""
    return f"query{variables} {{ {body} }} " + " ".join(fragments.values())


@given(
    document=_documents(),
    variables=st.fixed_dictionaries({"b0": st.booleans()}, optional={"b1": st.booleans()}),
)
def test_the_fields_are_the_keys_execution_answers_in_its_order(
    document: str, variables: dict[str, bool]
) -> None:
    assume(not validate(_SCHEMA, parse(document)))  # one alias of two fields is no document
    fields, executed = _keys(document, variables)
    if fields is not None or document.count("@") <= MAX_CONDITIONS:
        assert fields == executed  # leaves only: a key asked twice is one field


@pytest.mark.parametrize(
    "document",
    [
        "{ a ...F } fragment F on Query @include(if: true) { b }",  # not allowed there
        "{ t { x } t { x } }",  # sub-selections of one key merged
        "{ t { x } ...F } fragment F on Query { t { x } }",
        "{ a b @include(if: true) }",  # a directive no outcome was decided for
    ],
)
def test_what_needs_graphql_cores_merging_or_is_undecided_is_none(document: str) -> None:
    ast = parse(document)
    operation = ast.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    fragments = fragments_of(ast.definitions)
    assert collect(operation.selection_set.selections, fragments, "Query") is None


def test_a_fragment_on_a_union_is_spread_only_knowing_its_members() -> None:
    ast = parse("{ a ... on Both { b } ...U } fragment U on Both { c }")
    operation = ast.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    selections, fragments = operation.selection_set.selections, fragments_of(ast.definitions)
    fields = collect(selections, fragments, "Query", members=_MEMBERS)
    assert [response_key(f) for f in fields or []] == ["a", "b", "c"]
    assert collect(selections, fragments, "Query") is None  # whose types, it cannot know


@pytest.mark.parametrize(
    ("document", "variables"),
    [
        ("query($s: Boolean) { a @skip(if: $s) }", {"s": None}),  # null where Boolean! is
        ("query($s: Boolean) { a @skip(if: $s) }", {}),  # not given, and no default
        ("query($s: Boolean!) { a @skip(if: $s) }", {"s": "true"}),  # no boolean
    ],
)
def test_a_condition_that_is_no_boolean_is_not_decided(
    document: str, variables: dict[str, Any]
) -> None:
    operation = parse(document).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    nodes = conditional_nodes(operation, {})
    assert nodes is not None and decide(nodes, operation, variables) is None


def test_a_skip_that_is_true_needs_no_include_decided() -> None:
    """graphql-core looks at `@include` only when `@skip` does not leave the node out."""
    operation = parse("query($i: Boolean!) { a @include(if: $i) @skip(if: true) b }")
    only = operation.definitions[0]
    assert isinstance(only, OperationDefinitionNode)
    nodes = conditional_nodes(only, {})
    assert nodes is not None
    assert decide(nodes, only, {}) == (False,)
    assert decide(nodes, only, {"i": None}) == (False,)


def test_other_directives_and_too_many_conditions_are_not_decided() -> None:
    custom = parse("{ a @custom b }").definitions[0]
    many = parse("{ " + " ".join(f"k{n}: a @include(if: true)" for n in range(17)) + " }")
    assert isinstance(custom, OperationDefinitionNode)
    assert conditional_nodes(custom, {}) is None
    assert conditional_nodes(many.definitions[0], {}) is None  # type: ignore[arg-type]


def test_fragments_nested_in_fragments_are_spread_in_order() -> None:
    document = "{ c ... { ...F } x: a } fragment F on Query { ... on Query { b } }"
    assert _keys(document) == (["c", "b", "x"], ["c", "b", "x"])


def test_a_fragment_spread_twice_and_a_leaf_asked_twice_are_collected_once() -> None:
    document = "{ ...F a ...F @skip(if: false) } fragment F on Query { a b }"
    assert _keys(document) == (["a", "b"], ["a", "b"])
