"""Each package's public surface is exactly what its `__all__` claims."""

from __future__ import annotations

import node


def test_node_exports_resolve_and_are_listed_once() -> None:
    assert sorted(node.__all__) == node.__all__
    for name in node.__all__:
        assert getattr(node, name).__name__ == name


def test_node_has_no_unlisted_public_names() -> None:
    assert dir(node) == node.__all__
