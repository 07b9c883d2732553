"""A node call's failure becomes a gateway error in one place, `gateway/nodes/reply.py`: the
transport, the upstream, the coalescer and the planner hand failures on, and none of them
builds a node-call error of its own. Read from the syntax trees of every gateway module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
SEAM = GATEWAY / "nodes" / "reply.py"
DEFINED = GATEWAY / "model" / "errors.py"
# what a node call can fail with (a suspect node is the planner's choice, not a call's failure)
NODE_CALL_ERRORS = {
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NodeProtocolError",
    "NotOwnerError",
    "NotCaughtUpError",
}


def built_errors(source: str) -> list[tuple[int, str]]:
    """(line, class) of each node-call error `source` constructs."""
    return [
        (node.lineno, node.func.id)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in NODE_CALL_ERRORS
    ]


def test_node_call_errors_are_built_only_in_the_seam() -> None:
    elsewhere = [
        f"{path.relative_to(GATEWAY.parent)}:{line}: {name}"
        for path in sorted(GATEWAY.rglob("*.py"))
        if path not in (SEAM, DEFINED)
        for line, name in built_errors(path.read_text())
    ]
    assert not elsewhere, "build these in gateway/nodes/reply.py:\n" + "\n".join(elsewhere)


def test_the_seam_builds_each_of_them() -> None:
    assert {name for _, name in built_errors(SEAM.read_text())} == NODE_CALL_ERRORS


def test_a_construction_is_found() -> None:
    assert built_errors("raise NodeTimeoutError(view, 'late')") == [(1, "NodeTimeoutError")]
