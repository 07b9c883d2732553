"""Distributing the tests over pytest-xdist workers a folder at a time (`--dist-by-folder`).

A folder below tests/ that starts a whole cluster once for all its files (a package-scoped
fixture: `tests/e2e`, `tests/chaos`, `tests/differential`) must run on one worker: spread
over two, each worker would start a cluster of its own. pytest-xdist's `--dist loadfile`
spreads a folder's files; its `--dist loadgroup` marks groups in `item._nodeid`, which
pytest 9 no longer reads. So the scope of a test here is its folder below tests/, or its
file for a file directly in tests/; whole scopes go to workers, those of most tests first
(pytest-xdist's order for scopes).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from xdist.scheduler import LoadScopeScheduling

__all__ = ["FolderScheduling", "folder_scope"]

OPTION = "--dist-by-folder"


def folder_scope(nodeid: str) -> str:
    """The unit of work of the test `nodeid`: "tests/e2e" for "tests/e2e/test_x.py::t",
    "tests/test_x.py" for "tests/test_x.py::t"."""
    path = PurePosixPath(nodeid.split("::", 1)[0])
    return str(path.parent) if path.parent.name != "tests" else str(path)


class FolderScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with a folder below tests/ as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return folder_scope(nodeid)
