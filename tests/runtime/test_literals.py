"""The literal scan of `runtime.graphql_http.literals`: the skeleton memo scans every text as
the full scan does, and what it refuses goes the exact-text way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.graphql_http.literals import Skeletons, scan
from tests.http.test_literals import GATEWAY_FIELDS, NODE_FIELDS, texts


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(texts(GATEWAY_FIELDS), texts(NODE_FIELDS)), min_size=1, max_size=6))
def test_the_skeleton_memo_scans_as_the_full_scan(groups: list[list[str]]) -> None:
    skeletons = Skeletons(5000, size=4)  # small: texts of other skeletons push out templates
    for text in [t for group in groups for t in group] * 2:
        assert skeletons.scan(text) == scan(text, 5000), text


def test_what_the_scan_takes_and_refuses() -> None:
    found = scan('{ a: f(x: "k", y: [1, "k"], z: KEY) g(x: "k") }', 5000)
    assert found is not None
    assert found.signature == "{ a : f ( x : $0 y : $1 z : $2 ) g ( x : $0 ) }"
    assert found.literals == (("s", "k"), ("l", (("i", "1"), ("s", "k"))), ("e", "KEY"))
    refused = [
        "{ f(x: 1) @include(if: true) }",  # directives
        "{ ...F } fragment F on Query { f(x: 1) }",
        "mutation { f(x: 1) }",
        "{ __schema { f(x: 1) } }",
        '{ f(x: """block""") }',
        "{ f(x: 01) }",
        "{ f(x: [[1]]) }",
        '{ f(x: "\\u{1F600}") }',
        "{ f(x: $v) }",  # no literal
        "{ f(x: 1 }",
    ]
    for text in refused:
        assert scan(text, 5000) is None, text
    assert scan("{ f(x: 1) }", 5) is None  # at the token limit
