"""Behaviour that varies by view kind lives in the kind tables alone: each part looks a kind
up in its `KINDS` (pipeline/kinds, node/storage/kinds, node/subgraph/kinds, gateway/api/kinds,
gateway/reads/kinds.py), and no other module of the parts branches on the kind. A new kind is
then one entry per table, and a test of each table holds that it covers every `ViewKind`.

Read from the code's syntax trees, so a comment or a docstring naming a kind does not count,
and a branch written any way (`is`, `==`, `in`, `match`, a dict of its own) does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
PARTS = ("gateway", "node", "pipeline")
TABLES = (
    "pipeline/kinds",
    "node/storage/kinds",
    "node/subgraph/kinds",
    "gateway/api/kinds",
    "gateway/reads/kinds.py",
)


def _is_kind(node: ast.AST) -> bool:
    """`<anything>.kind`, or a member of ViewKind (`ViewKind.COUNT`)."""
    if isinstance(node, ast.Attribute) and node.attr == "kind":
        return True
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ViewKind"
    )


def kind_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place in `source` that branches on a view kind."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(
            _is_kind(part) for part in (node.left, *node.comparators)
        ):
            found.append((node.lineno, "compares a kind"))
        elif isinstance(node, ast.Match) and _is_kind(node.subject):
            found.append((node.lineno, "matches on a kind"))
        elif isinstance(node, ast.Subscript) and _is_kind(node.slice):
            found.append((node.lineno, "looks a kind up in a table of its own"))
        elif isinstance(node, ast.Dict) and any(k is not None and _is_kind(k) for k in node.keys):
            found.append((node.lineno, "keeps a table keyed by kind"))
    return found


def _outside_tables() -> list[Path]:
    files = [path for part in PARTS for path in sorted((REPO / part).rglob("*.py"))]
    return [
        path
        for path in files
        if not any(path.relative_to(REPO).as_posix().startswith(table) for table in TABLES)
    ]


def test_no_module_outside_the_kind_tables_branches_on_the_kind() -> None:
    branches = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in _outside_tables()
        for line, what in kind_branches(path.read_text())
    ]
    assert not branches, "move these into the part's kind table:\n" + "\n".join(branches)


@pytest.mark.parametrize(
    "code",
    [
        "if view.kind is ViewKind.COUNT: pass",
        "ok = view.kind in (ViewKind.COUNT, ViewKind.LATEST)",
        "ok = ViewKind.LATEST == kind",
        "match view.kind:\n    case _: pass",
        "reader = READERS[view.kind]",
        "READERS = {ViewKind.COUNT: 1}",
    ],
)
def test_each_way_of_branching_is_found(code: str) -> None:
    assert kind_branches(code), code


def test_looking_a_kind_up_in_a_table_is_not_a_branch() -> None:
    assert not kind_branches("fields = kind_of(view).fields(view)\nname = view.kind.value")


def test_the_tables_exist() -> None:
    for table in TABLES:
        assert (REPO / table).exists(), table
